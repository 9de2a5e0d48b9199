// The exporter's money gauges are the schema's money questions
// (sql/migrations/012_money_questions.sql): on one mixed data set, inside and outside the grace and
// the window, each gauge equals the count(*) (or the sum) of its function with the exporter's own
// parameters; and on a schema older than 012 the reconciliation and overcharges collectors report
// their failure through the exporter's health, keep serving, and answer once 012 is applied in
// place.
#include <QtTest>
#include <functional>
#include <pqxx/pqxx>

#include "exporter_harness.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "metric_keys.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;
using namespace idem::test;

namespace {

std::string errorsKey(const std::string& stage) {
  return "idempotency_exporter_collect_errors_total{stage=\"" + stage + "\"}";
}
}  // namespace

class TestExporterMoney : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

  double scalar(const std::string& sql) { return static_cast<double>(db_->scalar(sql)); }

  // Thirty business objects of every kind the questions tell apart, in two currencies, a third of
  // them an hour old (past the grace), a third two days old (past the window); and flows of a biz
  // type that does not move money.
  void mixedData() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    for (int i = 0; i < 30; ++i) {
      const std::string n = std::to_string(i);
      const std::string key = "k-" + n, biz = "o-" + n;
      const std::string currency = i % 2 == 0 ? "CNY" : "USD";
      auto flow = [&](FundFlowKind kind, std::int64_t amount, const std::string& ref) {
        client.recordFundFlow({"payment", biz, kind, amount, currency, ref + "-" + n, key});
      };
      const BeginResult begun = client.begin(payRequest(key, biz));
      const std::string token = begun.claimToken.value();
      switch (i % 6) {
        case 0:  // money moved, the answer lost
          QVERIFY(client.markUnknown(key, 1, "gateway timeout", token).ok());
          flow(FundFlowKind::Debit, 100, "gw");
          break;
        case 1:  // consistent
          QVERIFY(client.complete(key, 1, "{}", token).ok());
          flow(FundFlowKind::Debit, 100, "gw");
          break;
        case 2:  // SUCCESS, no money moved
          QVERIFY(client.complete(key, 1, "{}", token).ok());
          break;
        case 3:  // charged twice, nothing refunded, the claimant still at work
          flow(FundFlowKind::Debit, 100, "gw");
          flow(FundFlowKind::Debit, 100, "gw2");
          break;
        case 4:  // charged twice, refunded in part
          QVERIFY(client.complete(key, 1, "{}", token).ok());
          flow(FundFlowKind::Debit, 300, "gw");
          flow(FundFlowKind::Capture, 300, "gw2");
          flow(FundFlowKind::Refund, 100, "gw3");
          break;
        case 5:  // a hold only, declined
          flow(FundFlowKind::Freeze, 100, "gw");
          QVERIFY(client.fail(key, 1, "declined", token).ok());
          break;
      }
      client.recordFundFlow({"refund", "r-" + n, FundFlowKind::Debit, 5, currency, "r-" + n, {}});
    }
    // By i / 6 % 3, so that every kind has young, hour-old and two-day-old objects.
    auto age = [&](const std::string& by, int group) {
      const std::string which =
          "WHERE biz_id ~ '^o-[0-9]+$' AND substring(biz_id from 3)::int "
          "/ 6 % 3 = " +
          std::to_string(group);
      db_->exec(
          "SET session_replication_role = replica; UPDATE idem.fund_flows SET created_at = "
          "created_at - interval '" +
          by + "' " + which +
          "; UPDATE idem.records SET updated_at = updated_at - "
          "interval '" +
          by + "' " + which);
    };
    age("1 hour", 1);
    age("2 days", 2);
  }

  // The functions' answers with the exporter's parameters.
  void compareWithTheFunctions(const Series& s, const exporter::ExporterOptions& o) {
    const std::string window = "'" + std::to_string(o.reconcileWindow.count()) + " ms'";
    const std::string grace = "'" + std::to_string(o.reconcileGrace.count()) + " ms'";
    QCOMPARE(value(s, kDebitWithoutSuccessKey),
             std::optional(scalar("SELECT count(*) FROM idem.money_moved_without_success("
                                  "'{payment}', " +
                                  window + ", " + grace + ")")));
    QCOMPARE(value(s, kSuccessWithoutDebitKey),
             std::optional(scalar("SELECT count(*) FROM idem.success_without_money_moved("
                                  "'{payment}', " +
                                  window + ", " + grace + ")")));
    QCOMPARE(value(s, overchargedObjectsKey("payment")),
             std::optional(scalar("SELECT count(DISTINCT biz_id) FROM "
                                  "idem.overcharged_objects('{payment}', " +
                                  window + ")")));
    for (const char* currency : {"CNY", "USD"}) {
      QCOMPARE(value(s, overchargedAmountKey("payment", currency)).value_or(0),
               scalar(std::string("SELECT coalesce(sum(owed_minor), 0) FROM "
                                  "idem.overcharged_objects('{payment}', ") +
                      window + ") WHERE currency = '" + currency + "'"));
    }
  }

 private slots:
  void gaugesEqualTheMoneyQuestionsOnTheSameData() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_money");
    mixedData();
    for (const auto grace : {std::chrono::milliseconds(5 * 60'000), std::chrono::milliseconds(0)}) {
      auto options = testOptions(db_->dsn());
      options.reconcileGrace = grace;
      RunningExporter e(options);
      QVERIFY(e.waitForCollections(2));
      const Series s = e.scrape();
      compareWithTheFunctions(s, options);
      // The figures this data set was built for: the functions are not trivially empty.
      const bool graced = grace.count() > 0;
      QCOMPARE(value(s, kDebitWithoutSuccessKey), std::optional(graced ? 4.0 : 8.0));
      QCOMPARE(value(s, kSuccessWithoutDebitKey), std::optional(graced ? 2.0 : 4.0));
      QCOMPARE(value(s, overchargedObjectsKey("payment")), std::optional(8.0));  // no grace here
      QCOMPARE(value(s, overchargedObjectsKey("refund")), std::nullopt);
    }
  }

  // The start recomputes what the objects it meets owe a bounded number of objects a statement,
  // and keeps only those charged within the window: with more objects charged twice than one
  // statement takes, some refunded, a third of them charged days before the window, the gauges
  // still equal the definition.
  void manyObjectsChargedTwiceAtTheStartEqualTheDefinition() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_money");
    db_->exec(
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by) SELECT 'payment', 'm-' || i, 'DEBIT', 100 + i % 7, "
        "CASE WHEN i % 2 = 0 THEN 'CNY' ELSE 'USD' END, 'gw-m1-' || i, 'ledger' "
        "FROM generate_series(1, 1300) AS i; "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, duplicate_of, recorded_by) SELECT f.biz_type, f.biz_id, 'DEBIT', "
        "f.amount_minor, f.currency, 'gw-m2-' || f.biz_id, f.id, 'ledger' "
        "FROM idem.fund_flows AS f WHERE f.external_ref LIKE 'gw-m1-%'; "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by) SELECT f.biz_type, f.biz_id, 'REFUND', 50 * (i % 3), "
        "f.currency, 'gw-mr-' || f.biz_id, 'ledger' FROM idem.fund_flows AS f, "
        "LATERAL (SELECT substring(f.biz_id from 3)::int AS i) AS n "
        "WHERE f.external_ref LIKE 'gw-m1-%' AND n.i % 5 = 0 AND n.i % 3 <> 0; "
        "SET session_replication_role = replica; "
        "UPDATE idem.fund_flows SET created_at = created_at - interval '3 days' "
        "WHERE biz_id ~ '^m-[0-9]+$' AND substring(biz_id from 3)::int % 3 = 0; "
        "SET session_replication_role = origin; "
        "SELECT idem.recount_charged_objects()");
    const auto options = testOptions(db_->dsn());
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    compareWithTheFunctions(s, options);
    // More than one statement's worth, and not every object the start met.
    QVERIFY(value(s, overchargedObjectsKey("payment")).value_or(0) > 600);
    QVERIFY(value(s, overchargedObjectsKey("payment")).value_or(0) < 1300);
  }

  // A ledger loaded with triggers off, before the documented recount: idem.charged_objects says an
  // object was charged twice while its charges are not among the flows, and a refund of it is. Its
  // flows have no latest charge: the object owes nothing and the collector goes on, at its start
  // and when another refund of it arrives.
  void anObjectCountedChargedWithoutItsChargesOwesNothing() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_money");
    db_->exec(
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by) VALUES "
        "('payment', 'o-twice', 'DEBIT', 300, 'USD', 'gw-twice-1', 'ledger'), "
        "('payment', 'o-uncounted', 'REFUND', 100, 'USD', 'gw-uncounted-r1', 'ledger'); "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, duplicate_of, recorded_by) SELECT biz_type, biz_id, kind, amount_minor, "
        "currency, 'gw-twice-2', id, 'ledger' FROM idem.fund_flows "
        "WHERE external_ref = 'gw-twice-1'; "
        "SET session_replication_role = replica; "
        "INSERT INTO idem.charged_objects (biz_type, biz_id, charges, last_charge_at) "
        "VALUES ('payment', 'o-uncounted', 2, now())");
    const auto options = testOptions(db_->dsn());
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(2));
    const auto overchargesSucceeded = [&] {
      return value(e.scrape(),
                   "idempotency_exporter_collector_success{collector=\"overcharges\"}") ==
             std::optional(1.0);
    };
    QVERIFY(overchargesSucceeded());
    QCOMPARE(value(e.scrape(), overchargedObjectsKey("payment")), std::optional(1.0));
    db_->exec(
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, duplicate_of, recorded_by) SELECT biz_type, biz_id, kind, 50, currency, "
        "'gw-uncounted-r2', id, 'ledger' FROM idem.fund_flows "
        "WHERE external_ref = 'gw-uncounted-r1'");
    QVERIFY(e.waitForCollections(2));
    QVERIFY(overchargesSucceeded());
    const Series s = e.scrape();
    QCOMPARE(value(s, overchargedObjectsKey("payment")), std::optional(1.0));
    compareWithTheFunctions(s, options);
  }

  // The start's snapshot may show rows stamped after its now(): a transaction that began after the
  // start's and committed before its first statement, or a hot standby whose clock is behind the
  // primary's. Such a charge without a SUCCESS, and such a SUCCESS without a charge, are counted
  // once their time has passed the grace, as the definitions count them then.
  void rowsTheStartSeesStampedAfterItsNowAreCountedWhenTheirTimeComes() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_money");
    auto c = db_->connect();
    ProtocolClient client(*c);
    const BeginResult paid = client.begin(payRequest("k-later", "o-later-paid"));
    QVERIFY(client.complete("k-later", 1, "{}", paid.claimToken.value()).ok());
    db_->exec(
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by, created_at) VALUES ('payment', 'o-later-charged', 'DEBIT', "
        "100, 'USD', 'gw-later', 'ledger', now() + interval '3 seconds'); "
        "SET session_replication_role = replica; "
        "UPDATE idem.records SET updated_at = now() + interval '3 seconds' "
        "WHERE idempotency_key = 'k-later'");
    auto options = testOptions(db_->dsn());
    options.reconcileGrace = std::chrono::milliseconds(0);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    QCOMPARE(value(e.scrape(), kDebitWithoutSuccessKey), std::optional(0.0));
    QVERIFY(waitUntil(
        [&] {
          const Series s = e.scrape();
          return value(s, kDebitWithoutSuccessKey) == std::optional(1.0) &&
                 value(s, kSuccessWithoutDebitKey) == std::optional(1.0);
        },
        std::chrono::seconds(10)));
    compareWithTheFunctions(e.scrape(), options);
  }

  void beforeMigration12TheMoneyCollectorsFailThroughHealthThenAnswer() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_money_old", /*migrate=*/false);
    {
      auto c = db_->connect();
      MigrateOptions upTo11;
      upTo11.upTo = 11;
      migrate(*c, bundledMigrations(), upTo11);
    }
    auto asWriter = [&](const std::function<void(ProtocolClient&)>& write) {
      auto c = db_->connect();
      ProtocolClient client(*c);
      write(client);
    };
    asWriter([](ProtocolClient& client) {
      const BeginResult begun = client.begin(payRequest("k-1", "o-1"));
      QVERIFY(client.markUnknown("k-1", 1, "gateway timeout", begun.claimToken.value()).ok());
    });
    auto options = testOptions(db_->dsn());
    options.reconcileGrace = std::chrono::milliseconds(0);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    // Counted from the exporter's start: two DEBITs, one a duplicate charge.
    asWriter([](ProtocolClient& client) {
      for (const char* ref : {"gw-1", "gw-2"}) {
        client.recordFundFlow({"payment", "o-1", FundFlowKind::Debit, 100, "CNY", ref, "k-1"});
      }
    });
    QVERIFY(e.waitForCollections(3));
    Series s = e.scrape();
    QVERIFY(value(s, errorsKey("reconciliation")) >= std::optional(1.0));
    QVERIFY(value(s, errorsKey("overcharges")) >= std::optional(1.0));
    // Serving, the last figures (none yet) and the other collectors' counts.
    QCOMPARE(value(s, "idempotency_exporter_db_up"), std::optional(1.0));
    QCOMPARE(value(s, kDebitWithoutSuccessKey), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_last_reconcile_success_timestamp_seconds"),
             std::optional(0.0));
    QCOMPARE(value(s, overchargedObjectsKey("payment")), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_fund_flows_total{biz_type=\"payment\",kind=\"DEBIT\"}"),
             std::optional(2.0));

    // Migration 012 (and those after it) in place, the exporter running: the questions are
    // answered, the flows recorded before counted too (013 counts the ledger it finds).
    {
      auto c = db_->connect();
      const std::vector<std::string> applied = migrate(*c, bundledMigrations()).applied;
      QVERIFY(!applied.empty());
      QCOMPARE(applied.front(), std::string("012_money_questions.sql"));
    }
    QVERIFY(waitUntil([&] { return value(e.scrape(), kDebitWithoutSuccessKey) == 1.0; }));
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    const double errors = value(s, errorsKey("reconciliation")).value_or(-1);
    QVERIFY(value(s, "idempotency_exporter_last_reconcile_success_timestamp_seconds") > 0.0);
    QCOMPARE(value(s, overchargedObjectsKey("payment")), std::optional(1.0));
    QCOMPARE(value(s, overchargedAmountKey("payment", "CNY")), std::optional(100.0));
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(value(e.scrape(), errorsKey("reconciliation")), std::optional(errors));
  }

  void cleanup() { db_.reset(); }
};

QTEST_GUILESS_MAIN(TestExporterMoney)
#include "tst_exporter_money.moc"

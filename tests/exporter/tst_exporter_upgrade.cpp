// Exactly once across the upgrade of a database from schema contract version 1 to version 2, in
// place, under a running exporter: it counts traffic on the version-1 schema (its own function
// signatures, its UNKNOWN -> FAILED by the system), a writer keeps calling the protocol while the
// migrations run, then version-2 traffic (claim tokens, the reconciler, the operator's
// correction, retention's tombstones and `retired`). At each step every counter equals what SQL
// counts in the same tables: nothing lost, nothing counted twice.
#include <QtTest>
#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "exporter_harness.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "metric_keys.hpp"
#include "sql_truth.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;
using namespace idem::test;

namespace {

// The last migration of schema version 1 (sql/migrations/005_admin.sql); version 2 starts at 006.
constexpr int kLastVersion1Migration = 5;

// Version-1 calls, written as a version-1 client wrote them (no claim token).
constexpr const char* kBeginV1 =
    "SELECT outcome, version FROM idem.begin($1, 'payment', $2, 'pay', NULL, $3, $4::jsonb)";
constexpr const char* kCompleteV1 = "SELECT result FROM idem.complete($1, $2, '{}'::jsonb)";
constexpr const char* kFailV1 = "SELECT result FROM idem.fail($1, $2, $3)";
constexpr const char* kMarkUnknownV1 = "SELECT result FROM idem.mark_unknown($1, $2, $3)";
constexpr const char* kSettleV1 = "SELECT result FROM idem.settle($1, $2, $3, $4)";
// The same in both versions.
constexpr const char* kBeginBoth =
    "SELECT outcome FROM idem.begin($1, 'payment', $2, 'pay', NULL, 'initial', '{}'::jsonb)";
constexpr const char* kFundFlow =
    "SELECT flow_id FROM idem.record_fund_flow('payment', $1, $2, $3, 'CNY', $4, $5)";

BeginRequest beginRequest(const std::string& key, const std::string& bizId,
                          std::chrono::milliseconds lease = std::chrono::milliseconds(30'000)) {
  return payRequest(key, bizId, "payment", lease);
}

}  // namespace

class TestExporterUpgrade : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

  double scalar(const std::string& sql) { return static_cast<double>(db_->scalar(sql)); }

  // Every counter family against SQL: the rows counted before a purge (`before`) plus the rows
  // SQL holds above `after`.
  void compareCounters(const Series& s, const RowsAfter& after = {}, const Truth& requests = {},
                       const Truth& flows = {}, const Truth& duplicates = {},
                       const Truth& transitions = {}) {
    compareFamily(s, "idempotency_requests_total",
                  plus(requests, sqlRequests(*db_, after.attempts)));
    compareFamily(s, "idempotency_fund_flows_total",
                  plus(flows, sqlFundFlows(*db_, after.fundFlows)));
    compareFamily(s, "idempotency_duplicate_fund_flows_total",
                  plus(duplicates, sqlDuplicates(*db_, after.fundFlows)));
    compareFamily(s, "idempotency_transitions_total",
                  plus(transitions, sqlTransitions(*db_, after.transitions)));
  }

  // Traffic as a version-1 agent runtime sent it: every outcome and transition version 1 had,
  // its second-execution path included (fail on an UNKNOWN record), and records left unsettled for
  // the upgrade to carry over.
  void version1Traffic() {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    for (int i = 0; i < 40; ++i) {
      const std::string key = "v1-" + std::to_string(i);
      const std::string biz = "o-v1-" + std::to_string(i);
      const std::string payload = R"({"amount_minor": )" + std::to_string(100 + i) + "}";
      const pqxx::row b = tx.exec_params1(kBeginV1, key, biz, "initial", payload);
      QCOMPARE(std::string(b[0].c_str()), std::string("executed"));
      switch (i % 5) {
        case 0:  // paid, with a replayed retry and a duplicate charge now and then
          QCOMPARE(tx.exec_params1(kCompleteV1, key, 1)[0].as<std::string>(), "ok");
          tx.exec_params1(kFundFlow, biz, "DEBIT", 100 + i, "gw-" + key, key);
          if (i % 10 == 0) tx.exec_params1(kFundFlow, biz, "DEBIT", 100 + i, "gw2-" + key, key);
          tx.exec_params1(kBeginV1, key, biz, "llm", payload);
          break;
        case 1:  // declined, retried and re-claimed (version 1 re-claims every FAILED record)
          QCOMPARE(tx.exec_params1(kFailV1, key, 1, "declined")[0].as<std::string>(), "ok");
          tx.exec_params1(kBeginV1, key, biz, "framework", payload);
          break;
        case 2:  // the response lost, then declared failed by the system: version 1's hole
          QCOMPARE(tx.exec_params1(kMarkUnknownV1, key, 1, "timeout")[0].as<std::string>(), "ok");
          QCOMPARE(tx.exec_params1(kFailV1, key, 2, "given up")[0].as<std::string>(), "ok");
          break;
        case 3:  // lost, settled by an operator; a retry with another payload
          QCOMPARE(tx.exec_params1(kMarkUnknownV1, key, 1, "timeout")[0].as<std::string>(), "ok");
          QCOMPARE(tx.exec_params1(kSettleV1, key, 2, "SUCCESS", "gateway statement")[0]
                       .as<std::string>(),
                   "ok");
          tx.exec_params1(kBeginV1, key, biz, "http", std::string(R"({"amount_minor": 1})"));
          break;
        case 4:  // left UNKNOWN or PROCESSING for the upgrade to carry over; a copy in progress
          if (i % 10 == 4) {
            QCOMPARE(tx.exec_params1(kMarkUnknownV1, key, 1, "timeout")[0].as<std::string>(), "ok");
          }
          tx.exec_params1(kBeginV1, key, biz, "callback", payload);
          break;
      }
    }
  }

  // Version-2 traffic, through the version-2 client, on records of both versions.
  void version2Traffic() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    for (int i = 0; i < 20; ++i) {
      const std::string key = "v2-" + std::to_string(i);
      const BeginResult b = client.begin(beginRequest(key, "o-v2-" + std::to_string(i)));
      QCOMPARE(b.outcome, Outcome::Executed);
      QVERIFY(b.claimToken);
      if (i % 2 == 0) {
        QVERIFY(client.complete(key, 1, "{}", *b.claimToken).ok());
      } else {
        QVERIFY(client.markUnknown(key, 1, "timeout", *b.claimToken).ok());
        QVERIFY(
            client.resolve(key, 2, RecordStatus::Success, "gateway lookup", R"({"ref": 1})").ok());
      }
      BeginRequest retry = beginRequest(key, "o-v2-" + std::to_string(i));
      retry.source = TriggerSource::Llm;
      QCOMPARE(client.begin(retry).outcome, Outcome::Replayed);
    }
    // A version-1 UNKNOWN record decided by the reconciler, a version-1 FAILED one corrected.
    QVERIFY(client.resolve("v1-4", 2, RecordStatus::Success, "gateway lookup", R"({"ref": "v1-4"})")
                .ok());
    QVERIFY(
        client.settle("v1-2", 3, RecordStatus::Success, "statement shows the charge", "{}").ok());
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_upgrade", /*migrate=*/false);
    auto c = db_->connect();
    MigrateOptions v1;
    v1.upTo = kLastVersion1Migration;
    migrate(*c, bundledMigrations(), v1);
    QCOMPARE(scalar("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'idem' AND "
                    "tablename = 'retired_keys'"),
             0.0);
  }

  void countersStayExactAcrossTheUpgradeInPlace() {
    auto options = testOptions(db_->dsn());
    options.ratioWindow = std::chrono::hours(1);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));

    // Version 1.
    version1Traffic();
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    compareCounters(s);
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "FAILED", "system")), std::optional(8.0));
    // The series from the start are the connected database's state machine: version 1's has no
    // reconciler, so it has no zero for one (the exporter used to carry version 2's table).
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "SUCCESS", "reconciler")), std::nullopt);

    // The upgrade, while a writer keeps calling what both versions have and the exporter runs.
    std::atomic<bool> stop{false};
    std::atomic<int> written{0};
    std::thread writer([&] {
      auto wc = db_->connect();
      for (int i = 0; !stop; ++i) {
        try {
          pqxx::nontransaction tx(*wc);
          const std::string key = "up-" + std::to_string(i);
          tx.exec_params1(kBeginBoth, key, "o-" + key);
          tx.exec_params1(kFundFlow, "o-" + key, "DEBIT", 10, "gw-" + key, key);
          ++written;
        } catch (const std::exception&) {
          // A call that met the upgrade mid-way; SQL's counts are the truth either way.
        }
      }
    });
    QVERIFY(waitUntil([&] { return written >= 20; }));
    {
      auto c = db_->connect();
      const MigrationReport report = migrate(*c, bundledMigrations());
      QVERIFY2(!report.applied.empty(), "the version-2 migrations ran");
    }
    const int atUpgrade = written;
    QVERIFY(waitUntil([&] { return written >= atUpgrade + 20; }));
    stop = true;
    writer.join();
    QCOMPARE(scalar("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'idem' AND "
                    "tablename = 'retired_keys'"),
             1.0);
    QVERIFY(e.waitForCollections(2));
    compareCounters(e.scrape());

    // Version 2.
    version2Traffic();
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    compareCounters(s);
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "SUCCESS", "reconciler")), std::optional(11.0));
    QCOMPARE(value(s, transitionsKey("FAILED", "SUCCESS", "operator")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "FAILED", "system")), std::optional(8.0));

    // Retention on records of both versions: tombstones, `retired`, counters that never go back.
    const Series beforePurge = s;
    const Truth requests = sqlRequests(*db_), flows = sqlFundFlows(*db_),
                duplicates = sqlDuplicates(*db_), transitions = sqlTransitions(*db_);
    RowsAfter after;
    after.attempts = db_->scalar("SELECT max(id) FROM idem.attempts");
    after.fundFlows = db_->scalar("SELECT max(id) FROM idem.fund_flows");
    after.transitions = db_->scalar("SELECT max(id) FROM idem.transitions");
    QTest::qWait(5);
    db_->exec("SELECT * FROM idem.purge('1 microsecond')");
    QVERIFY(scalar("SELECT count(*) FROM idem.retired_keys") > 0);
    {
      auto c = db_->connect();
      ProtocolClient client(*c);
      BeginRequest late = beginRequest("v1-0", "o-v1-0");
      late.requestPayload = R"({"amount_minor": 100})";  // the request as version 1 saw it
      late.source = TriggerSource::Callback;
      QCOMPARE(client.begin(late).outcome, Outcome::Retired);
      late = beginRequest("v2-0", "o-v2-0");
      late.source = TriggerSource::Http;
      QCOMPARE(client.begin(late).outcome, Outcome::Retired);
    }
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    compareCounters(s, after, requests, flows, duplicates, transitions);
    QCOMPARE(value(s, requestsKey("payment", "callback", "retired")), std::optional(1.0));
    for (const auto& [key, v] : beforePurge) {
      if (key.starts_with("idempotency_requests_total") ||
          key.starts_with("idempotency_transitions_total")) {
        QVERIFY2(value(s, key) >= std::optional(v), key.c_str());
      }
    }
    QCOMPARE(value(s, "idempotency_exporter_db_up"), std::optional(1.0));
    QCOMPARE(value(s, R"(idempotency_exporter_reads_deferred_total{table="attempts"})"),
             std::optional(0.0));
  }
};

QTEST_GUILESS_MAIN(TestExporterUpgrade)
#include "tst_exporter_upgrade.moc"

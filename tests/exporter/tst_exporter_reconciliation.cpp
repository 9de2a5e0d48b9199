// The reconciliation gauges are kept from what each collection adds (the collector's open
// questions), and must stay equal to the schema's whole-window definitions
// (idem.money_moved_without_success, idem.success_without_money_moved):
//   - under concurrent writers whose flows and SUCCESS transitions commit in either order, held
//     open across collections, with rollbacks among them;
//   - after a restart of the exporter, which rebuilds them from the window;
//   - at the window's edge, as time passes;
//   - when retention removes SUCCESS records that had no charge;
//   - for rows loaded with the triggers off, followed by the documented recount;
// and the overcharges gauges, kept the same way, equal idem.overcharged_objects as duplicate
// charges, refunds and rollbacks arrive from concurrent writers, and after a restart.
// A crash of PostgreSQL under traffic is tst_exporter_outage's.
#include <QtTest>
#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "exporter_harness.hpp"
#include "idem/protocol_client.hpp"
#include "metric_keys.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;
using namespace idem::test;
using namespace std::chrono_literals;

namespace {

std::string ms(std::chrono::milliseconds d) {
  return "'" + std::to_string(d.count()) + " ms'";
}

// Writers run on their own threads, where QVERIFY cannot: they throw, and the test fails on it.
template <typename Result>
void expectOk(const Result& r, const std::string& key) {
  if (!r.ok()) throw std::runtime_error("a decision on " + key + " was refused");
}

}  // namespace

class TestExporterReconciliation : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

  double definition(const char* function, const exporter::ExporterOptions& o) {
    return static_cast<double>(db_->scalar(std::string("SELECT count(*) FROM idem.") + function +
                                           "('{payment}', " + ms(o.reconcileWindow) + ", " +
                                           ms(o.reconcileGrace) + ")"));
  }

  // Both gauges equal their definitions on a still database, after two more reconciliations.
  void expectEqualToTheDefinitions(RunningExporter& e, const exporter::ExporterOptions& o,
                                   double debitWithout, double successWithout) {
    QVERIFY(e.waitForCollections(3));
    const Series s = e.scrape();
    QCOMPARE(definition("money_moved_without_success", o), debitWithout);
    QCOMPARE(definition("success_without_money_moved", o), successWithout);
    QCOMPARE(value(s, kDebitWithoutSuccessKey), std::optional(debitWithout));
    QCOMPARE(value(s, kSuccessWithoutDebitKey), std::optional(successWithout));
  }

  // The overcharges gauges equal the definition's objects and amounts, after three more
  // reconciliations; returns the objects.
  double expectOverchargesEqualTheDefinition(RunningExporter& e,
                                             const exporter::ExporterOptions& o) {
    if (!e.waitForCollections(3)) {
      QTest::qFail("no collection", __FILE__, __LINE__);
      return -1;
    }
    const Series s = e.scrape();
    const std::string from =
        "FROM idem.overcharged_objects('{payment}', " + ms(o.reconcileWindow) + ")";
    const auto objects = static_cast<double>(db_->scalar("SELECT count(DISTINCT biz_id) " + from));
    [&] { QCOMPARE(value(s, overchargedObjectsKey("payment")), std::optional(objects)); }();
    for (const char* currency : {"CNY", "USD"}) {
      const auto owed = static_cast<double>(db_->scalar(
          "SELECT coalesce(sum(owed_minor), 0) " + from + " WHERE currency = '" + currency + "'"));
      [&] { QCOMPARE(value(s, overchargedAmountKey("payment", currency)).value_or(0), owed); }();
    }
    return objects;
  }

  static exporter::ExporterOptions options(const std::string& dsn) {
    auto o = testOptions(dsn);
    o.reconcileGrace = 0ms;
    o.reconcileWindow = 1h;
    return o;
  }

  // One writer: `objects` business objects of its own, each one of five stories (by i % 5), the
  // first two stories with the later commit held open across collections for the first objects.
  // Returns what the stories add to {debit without success, success without debit}.
  static std::pair<int, int> writer(const std::string& dsn, int id, int objects) {
    pqxx::connection a(dsn), b(dsn);
    ProtocolClient client(a);
    std::pair<int, int> expected{0, 0};
    for (int i = 0; i < objects; ++i) {
      const std::string n = std::to_string(id) + "-" + std::to_string(i);
      const std::string key = "k-" + n, biz = "o-" + n;
      const std::string flow = "SELECT * FROM idem.record_fund_flow('payment', " + a.quote(biz) +
                               ", 'DEBIT', 100, 'USD', " + a.quote("gw-" + n) + ", " +
                               a.quote(key) + ")";
      const BeginResult begun = client.begin(payRequest(key, biz));
      const std::string token = begun.claimToken.value();
      const std::string complete =
          "SELECT * FROM idem.complete(" + b.quote(key) + ", 1, '{}', " + b.quote(token) + ")";
      const bool hold = i < 10;
      switch (i % 5) {
        case 0: {  // the flow takes its id first, the SUCCESS commits first
          pqxx::work f(a);
          f.exec(flow);
          pqxx::work c(b);
          c.exec(complete);
          c.commit();
          if (hold) std::this_thread::sleep_for(300ms);
          f.commit();
          break;
        }
        case 1: {  // the SUCCESS takes its id first, the flow commits first
          pqxx::work c(b);
          c.exec(complete);
          pqxx::work f(a);
          f.exec(flow);
          f.commit();
          if (hold) std::this_thread::sleep_for(300ms);
          c.commit();
          break;
        }
        case 2: {  // the flow rolls back: a SUCCESS without money moved
          {
            pqxx::work f(a);
            f.exec(flow);
            f.abort();
          }
          expectOk(client.complete(key, 1, "{}", token), key);
          ++expected.second;
          break;
        }
        case 3: {  // the answer lost after the charge
          expectOk(client.markUnknown(key, 1, "gateway timeout", token), key);
          pqxx::work f(a);
          f.exec(flow);
          f.commit();
          ++expected.first;
          break;
        }
        case 4: {  // the SUCCESS rolls back after the charge: still in flight, money moved
          pqxx::work f(a);
          f.exec(flow);
          f.commit();
          pqxx::work c(b);
          c.exec(complete);
          c.abort();
          ++expected.first;
          break;
        }
      }
    }
    return expected;
  }

 private slots:
  void init() { db_ = std::make_unique<TestDatabase>("tst_exporter_reconciliation"); }
  void cleanup() { db_.reset(); }

  void equalsTheDefinitionsWhateverTheCommitOrder() {
    const auto o = options(db_->dsn());
    auto e = std::make_unique<RunningExporter>(o);
    QVERIFY(e->waitForCollections(1));
    constexpr int kWriters = 6;
    constexpr int kObjects = 40;
    std::vector<std::pair<int, int>> expected(kWriters);
    std::vector<std::string> errors(kWriters);
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        try {
          expected[w] = writer(db_->dsn(), w, kObjects);
        } catch (const std::exception& ex) {
          errors[w] = ex.what();
        }
      });
    }
    for (auto& t : writers) t.join();
    for (const std::string& error : errors) QVERIFY2(error.empty(), error.c_str());
    double debitWithout = 0, successWithout = 0;
    for (const auto& [d, s] : expected) {
      debitWithout += d;
      successWithout += s;
    }
    QCOMPARE(debitWithout, 2.0 * kWriters * kObjects / 5);
    QCOMPARE(successWithout, 1.0 * kWriters * kObjects / 5);
    expectEqualToTheDefinitions(*e, o, debitWithout, successWithout);
    if (QTest::currentTestFailed()) return;

    // The questions close as they would: the lost answers arrive, a late flow for a SUCCESS.
    {
      auto c = db_->connect();
      pqxx::nontransaction tx(*c);
      tx.exec(
          "SELECT idem.record_fund_flow('payment', 'o-0-2', 'DEBIT', 100, 'USD', 'late-0-2', "
          "'k-0-2')");
    }
    successWithout -= 1;
    expectEqualToTheDefinitions(*e, o, debitWithout, successWithout);
    if (QTest::currentTestFailed()) return;

    // A new exporter rebuilds the same answers from the window.
    e.reset();
    RunningExporter again(o);
    expectEqualToTheDefinitions(again, o, debitWithout, successWithout);
    if (QTest::currentTestFailed()) return;
  }

  void overchargesFollowChargesAndRefunds() {
    const auto o = options(db_->dsn());
    auto e = std::make_unique<RunningExporter>(o);
    QVERIFY(e->waitForCollections(1));
    // Each writer charges its objects twice (a CAPTURE in the other currency for every third),
    // refunds some in part and some in full, and rolls some second charges back.
    constexpr int kWriters = 4;
    constexpr int kObjects = 30;
    std::vector<std::string> errors(kWriters);
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        try {
          pqxx::connection c(db_->dsn());
          for (int i = 0; i < kObjects; ++i) {
            const std::string n = std::to_string(w) + "-" + std::to_string(i);
            auto flow = [&](const char* kind, int amount, const char* currency,
                            const std::string& ref) {
              return "SELECT idem.record_fund_flow('payment', " + c.quote("twice-" + n) + ", '" +
                     kind + "', " + std::to_string(amount) + ", '" + currency + "', " +
                     c.quote(ref + n) + ")";
            };
            pqxx::nontransaction(c).exec(flow("DEBIT", 500, "USD", "first-"));
            pqxx::work second(c);
            second.exec(i % 3 == 0 ? flow("CAPTURE", 300, "CNY", "second-")
                                   : flow("DEBIT", 500, "USD", "second-"));
            if (i % 5 == 4) {
              second.abort();
              continue;
            }
            second.commit();
            if (i % 4 == 1) pqxx::nontransaction(c).exec(flow("REFUND", 200, "USD", "part-"));
            if (i % 4 == 2) pqxx::nontransaction(c).exec(flow("REFUND", 500, "USD", "full-"));
          }
        } catch (const std::exception& ex) {
          errors[w] = ex.what();
        }
      });
    }
    for (auto& t : writers) t.join();
    for (const std::string& error : errors) QVERIFY2(error.empty(), error.c_str());
    const double objects = expectOverchargesEqualTheDefinition(*e, o);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(objects > 0 && objects < kWriters * kObjects, "the data set is not trivial");

    // A refund pays back the rest of one refunded in part (charged 500 twice, 200 back): one
    // object fewer.
    db_->exec(
        "SELECT idem.record_fund_flow('payment', 'twice-0-5', 'REFUND', 300, 'USD', "
        "'late-refund')");
    QCOMPARE(expectOverchargesEqualTheDefinition(*e, o), objects - 1);
    if (QTest::currentTestFailed()) return;

    e.reset();
    RunningExporter again(o);
    QCOMPARE(expectOverchargesEqualTheDefinition(again, o), objects - 1);
  }

  void followsTheWindowsEdge() {
    auto o = options(db_->dsn());
    o.reconcileWindow = 3s;
    o.reconcileGrace = 1s;
    RunningExporter e(o);
    QVERIFY(e.waitForCollections(1));
    {
      auto c = db_->connect();
      ProtocolClient client(*c);
      const BeginResult begun = client.begin(payRequest("edge", "edge-1"));
      QVERIFY(client.markUnknown("edge", 1, "gateway timeout", begun.claimToken.value()).ok());
      client.recordFundFlow({"payment", "edge-1", FundFlowKind::Debit, 100, "USD", "gw-edge", {}});
    }
    // Past the grace, counted; past the window, gone, as the definition says at the end. (The
    // grace on data of known age: tst_exporter_money.)
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), kDebitWithoutSuccessKey) == std::optional(1.0); }, 10s));
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), kDebitWithoutSuccessKey) == std::optional(0.0); }, 10s));
    QCOMPARE(definition("money_moved_without_success", o), 0.0);
  }

  void purgedSuccessesLeaveTheQuestion() {
    const auto o = options(db_->dsn());
    RunningExporter e(o);
    // More than one collection looks up again (256), so that the look-ups must go round.
    constexpr int kSucceeded = 300;
    {
      auto c = db_->connect();
      ProtocolClient client(*c);
      for (int i = 0; i < kSucceeded; ++i) {
        const std::string key = "purged-" + std::to_string(i);
        const BeginResult begun = client.begin(payRequest(key, key));
        QVERIFY(client.complete(key, 1, "{}", begun.claimToken.value()).ok());
      }
    }
    expectEqualToTheDefinitions(e, o, 0, kSucceeded);
    if (QTest::currentTestFailed()) return;
    std::this_thread::sleep_for(50ms);
    db_->exec("SELECT idem.purge(interval '1 millisecond')");
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), 0LL);
    expectEqualToTheDefinitions(e, o, 0, 0);
  }

  void countsRowsLoadedWithTheTriggersOff() {
    const auto o = options(db_->dsn());
    RunningExporter e(o);
    QVERIFY(e.waitForCollections(1));
    // A bulk load as the owner, the protocol's triggers off, then the recount the contract
    // documents for such a load.
    db_->exec(
        "SET session_replication_role = replica; "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by) SELECT 'payment', 'loaded-' || i, 'DEBIT', 100, 'USD', "
        "'gw-loaded-' || i, 'ledger' FROM generate_series(1, 25) AS i; "
        "SET session_replication_role = origin; "
        "SELECT idem.recount_charged_objects()");
    expectEqualToTheDefinitions(e, o, 25, 0);
    if (QTest::currentTestFailed()) return;
  }
};

QTEST_GUILESS_MAIN(TestExporterReconciliation)
#include "tst_exporter_reconciliation.moc"

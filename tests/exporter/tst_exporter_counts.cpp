// The exporter's figures against what SQL counts in the same tables: simulated traffic with a
// fixed seed, every counter series and the three ratios equal (not close); the state gauges and
// reconciliation; purging old rows never moves a counter back; a start reads only the ratio
// window; promtool accepts the output, with zeros for every known label value before traffic;
// a collection blocked on a lock does not hold up /metrics.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>
#include <pqxx/pqxx>

#include "exporter_harness.hpp"
#include "idem/protocol_client.hpp"
#include "idem/vocabulary.hpp"
#include "metric_keys.hpp"
#include "simulator.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

sim::SimulationConfig traffic(const TestDatabase& db, const std::string& runId,
                              std::int64_t operations) {
  sim::SimulationConfig c;
  c.connection.dsn = db.dsn();
  c.connection.source = "test";
  c.agents = 4;
  c.seed = 20240501;
  c.operations = operations;
  c.runId = runId;
  c.doubleChargeRate = 0.05;  // the buggy downstream: duplicate fund flows to count
  c.lease = std::chrono::milliseconds(60'000);
  return c;
}

// SQL's counts of one table grouped by the label columns, as series keys.
std::map<std::string, double> sqlCounts(const TestDatabase& db, const std::string& sql,
                                        const std::function<std::string(const pqxx::row&)>& key) {
  std::map<std::string, double> out;
  auto c = db.connect();
  pqxx::nontransaction tx(*c);
  for (const pqxx::row& r : tx.exec(sql)) out[key(r)] += r[r.size() - 1].as<double>();
  return out;
}

// Every series of the family in the scrape equals SQL's count (0 where SQL has no row), and every
// SQL group is a series of the scrape.
void compareFamily(const Series& scraped, const std::string& family,
                   const std::map<std::string, double>& expected) {
  int seen = 0;
  for (const auto& [key, v] : scraped) {
    if (!key.starts_with(family + "{")) continue;
    ++seen;
    const auto e = expected.find(key);
    const double want = e == expected.end() ? 0.0 : e->second;
    QVERIFY2(v == want,
             (key + ": exporter " + std::to_string(v) + ", SQL " + std::to_string(want)).c_str());
  }
  for (const auto& [key, want] : expected) {
    QVERIFY2(scraped.count(key) == 1, (key + " is missing from the scrape").c_str());
  }
  QVERIFY2(seen > 0, (family + " has no series").c_str());
}

// promtool's verdict on a scrape: empty when it accepts it, else what it said.
std::string promtoolProblems(const QByteArray& body) {
  const QString promtool = QStandardPaths::findExecutable(QStringLiteral("promtool"));
  if (promtool.isEmpty()) return "promtool (Debian package prometheus) is needed by this test";
  QProcess p;
  p.start(promtool, {QStringLiteral("check"), QStringLiteral("metrics")});
  if (!p.waitForStarted()) return "promtool did not start";
  p.write(body);
  p.closeWriteChannel();
  if (!p.waitForFinished(30000)) return "promtool did not finish";
  const QByteArray output = p.readAllStandardOutput() + p.readAllStandardError();
  return p.exitCode() == 0 ? std::string() : "promtool: " + output.toStdString();
}

}  // namespace

class TestExporterCounts : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;
  std::atomic<bool> stop_{false};

  double scalar(const std::string& sql) {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    return tx.exec1(sql)[0].as<double>();
  }

  std::map<std::string, double> sqlRequests() {
    return sqlCounts(
        *db_,
        "SELECT biz_type, trigger_source, outcome, count(*) FROM idem.attempts GROUP BY 1, 2, 3",
        [](const pqxx::row& r) { return requestsKey(r[0].c_str(), r[1].c_str(), r[2].c_str()); });
  }
  std::map<std::string, double> sqlFundFlows() {
    return sqlCounts(*db_, "SELECT biz_type, kind, count(*) FROM idem.fund_flows GROUP BY 1, 2",
                     [](const pqxx::row& r) { return fundFlowsKey(r[0].c_str(), r[1].c_str()); });
  }
  std::map<std::string, double> sqlDuplicates() {
    return sqlCounts(*db_,
                     "SELECT biz_type, kind, count(*) FROM idem.fund_flows WHERE duplicate_of IS "
                     "NOT NULL GROUP BY 1, 2",
                     [](const pqxx::row& r) { return duplicatesKey(r[0].c_str(), r[1].c_str()); });
  }
  std::map<std::string, double> sqlTransitions() {
    return sqlCounts(*db_,
                     "SELECT coalesce(from_status, 'none'), to_status, actor_kind, count(*) FROM "
                     "idem.transitions GROUP BY 1, 2, 3",
                     [](const pqxx::row& r) {
                       return transitionsKey(r[0].c_str(), r[1].c_str(), r[2].c_str());
                     });
  }

  // The three figures over all rows, computed as the exporter must: hits / all, retries of a
  // source / all, duplicates / all flows.
  void compareRatios(const std::vector<prometheus::MetricFamily>& families) {
    const double all = scalar("SELECT count(*) FROM idem.attempts");
    const double hits =
        scalar("SELECT count(*) FROM idem.attempts WHERE outcome IN ('replayed', 'in_progress')");
    QVERIFY(all > 0);
    QVERIFY(hits > 0);
    QCOMPARE(familyValue(families, "idempotency_hit_ratio"), std::optional(hits / all));
    for (const char* source : {"llm", "framework", "http", "callback"}) {
      const double n =
          scalar(std::string("SELECT count(*) FROM idem.attempts WHERE trigger_source = '") +
                 source + "'");
      QVERIFY2(n > 0, source);
      QCOMPARE(familyValue(families, "idempotency_retry_trigger_ratio", {{"source", source}}),
               std::optional(n / all));
    }
    const double flows = scalar("SELECT count(*) FROM idem.fund_flows");
    const double duplicates =
        scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL");
    QVERIFY(duplicates > 0);
    QCOMPARE(familyValue(families, "idempotency_duplicate_fund_flow_ratio"),
             std::optional(duplicates / flows));
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<TestDatabase>("tst_exporter_counts"); }
  void init() { db_->reset(); }

  void countersAndRatiosEqualSqlCountsAfterSimulatedTraffic() {
    auto options = testOptions(db_->dsn());
    options.ratioWindow = std::chrono::hours(1);  // the window covers all traffic
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    const sim::SimulationSummary s = sim::simulate(traffic(*db_, "truth", 1500), stop_);
    QVERIFY(s.doubleCharges > 0);
    QVERIFY(e.waitForCollections(2));  // traffic is over: the next collections see every row

    const HttpAnswer answer = httpGet({e.url(), {}, {}});
    QCOMPARE(answer.status, 200);
    const std::string problems = promtoolProblems(answer.body);
    QVERIFY2(problems.empty(), problems.c_str());
    const Series scraped = parseMetrics(answer.body);
    compareFamily(scraped, "idempotency_requests_total", sqlRequests());
    compareFamily(scraped, "idempotency_fund_flows_total", sqlFundFlows());
    compareFamily(scraped, "idempotency_duplicate_fund_flows_total", sqlDuplicates());
    compareFamily(scraped, "idempotency_transitions_total", sqlTransitions());
    compareRatios(e.exporter().collect());
    // The state gauges over the same rows.
    const auto unsettled = sqlCounts(*db_,
                                     "SELECT biz_type, status, count(*) FROM idem.records WHERE "
                                     "status IN ('PROCESSING', 'UNKNOWN') GROUP BY 1, 2",
                                     [](const pqxx::row& r) {
                                       return "idempotency_records{biz_type=\"" +
                                              std::string(r[0].c_str()) + "\",status=\"" +
                                              r[1].c_str() + "\"}";
                                     });
    compareFamily(scraped, "idempotency_records", unsettled);
    QCOMPARE(value(scraped, tableKey("idempotency_exporter_rows_read_total", "attempts")),
             std::optional(scalar("SELECT count(*) FROM idem.attempts")));
    QCOMPARE(value(scraped, "idempotency_exporter_db_up"), std::optional(1.0));
  }

  void purgingOldRowsNeverMovesCountersBack() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    sim::simulate(traffic(*db_, "before", 300), stop_);
    QVERIFY(e.waitForCollections(2));
    const Series before = e.scrape();
    const double requestsBefore = scalar("SELECT count(*) FROM idem.attempts");
    const double transitionsBefore = scalar("SELECT count(*) FROM idem.transitions");

    db_->exec("SELECT * FROM idem.purge('1 microsecond')");
    QCOMPARE(scalar("SELECT count(*) FROM idem.attempts"), 0.0);
    QVERIFY(e.waitForCollections(2));
    const Series afterPurge = e.scrape();
    for (const auto& [key, v] : before) {
      if (!key.starts_with("idempotency_requests_total") &&
          !key.starts_with("idempotency_transitions_total") &&
          !key.starts_with("idempotency_fund_flows_total")) {
        continue;
      }
      QVERIFY2(value(afterPurge, key) == std::optional(v), key.c_str());
    }

    sim::simulate(traffic(*db_, "after", 200), stop_);
    QVERIFY(e.waitForCollections(2));
    const Series after = e.scrape();
    double requests = 0, transitions = 0;
    for (const auto& [key, v] : after) {
      if (key.starts_with("idempotency_requests_total")) requests += v;
      if (key.starts_with("idempotency_transitions_total")) transitions += v;
    }
    QCOMPARE(requests, requestsBefore + scalar("SELECT count(*) FROM idem.attempts"));
    QCOMPARE(transitions, transitionsBefore + scalar("SELECT count(*) FROM idem.transitions"));
    compareFamily(after, "idempotency_fund_flows_total", sqlFundFlows());
  }

  void startReadsTheRatioWindowSoFiguresAreRightFromTheFirstScrape() {
    sim::simulate(traffic(*db_, "earlier", 400), stop_);
    auto options = testOptions(db_->dsn());
    options.ratioWindow = std::chrono::hours(1);
    QElapsedTimer started;
    started.start();
    RunningExporter e(options);
    QVERIFY(waitUntil([&] { return e.exporter().collections() >= 1; }, std::chrono::seconds(10)));
    QVERIFY2(started.elapsed() < 2000, "the first collection finished within 2 s of the start");
    compareRatios(e.exporter().collect());
    // Rows committed before the start are not counted: counters start at 0, a counter reset.
    const Series scraped = e.scrape();
    for (const auto& [key, v] : scraped) {
      if (key.starts_with("idempotency_requests_total")) QVERIFY2(v == 0, key.c_str());
    }
    // The biz types the tables name have their series from the start.
    QCOMPARE(value(scraped, requestsKey("coupon", "initial", "executed")), std::optional(0.0));
  }

  void zerosForEveryKnownLabelBeforeTrafficAndPromtoolAcceptsTheOutput() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    const HttpAnswer answer = httpGet({e.url(), {}, {}});
    QCOMPARE(answer.status, 200);
    const Series s = parseMetrics(answer.body);
    for (TriggerSource src : allValues<TriggerSource>()) {
      for (Outcome o : allValues<Outcome>()) {
        QCOMPARE(value(s, requestsKey("payment", std::string(format(src)), std::string(format(o)))),
                 std::optional(0.0));
      }
    }
    for (FundFlowKind k : allValues<FundFlowKind>()) {
      QCOMPARE(value(s, fundFlowsKey("payment", std::string(format(k)))), std::optional(0.0));
      QCOMPARE(value(s, duplicatesKey("payment", std::string(format(k)))), std::optional(0.0));
    }
    QCOMPARE(value(s, transitionsKey("none", "PROCESSING", "system")), std::optional(0.0));
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "SUCCESS", "operator")), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_records{biz_type=\"payment\",status=\"UNKNOWN\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_stuck_records{biz_type=\"payment\"}"), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_oldest_unsettled_age_seconds{status=\"PROCESSING\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"debit_without_success\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"success_without_debit\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_collect_errors_total{stage=\"connect\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_collect_errors_total{stage=\"requests\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_rows_read_total", "fund_flows")),
             std::optional(0.0));
    QVERIFY(std::isnan(*value(s, "idempotency_hit_ratio")));
    QVERIFY(std::isnan(*value(s, "idempotency_retry_trigger_ratio{source=\"llm\"}")));
    QCOMPARE(value(s, "idempotency_exporter_build_info{version=\"" IDEMWATCH_VERSION
                      "\",revision=\"" IDEMWATCH_REVISION "\"}"),
             std::optional(1.0));

    const std::string problems = promtoolProblems(answer.body);
    QVERIFY2(problems.empty(), problems.c_str());
  }

  void unsettledRecordsAndStuckLeasesFromTheUnsettledSet() {
    RunningExporter e(testOptions(db_->dsn()));
    auto c = db_->connect();
    ProtocolClient client(*c);
    BeginRequest stuck{"k-stuck", "payment",
                       "o-1",     "pay",
                       {},        TriggerSource::Initial,
                       "{}",      std::chrono::milliseconds(1),
                       {},        {}};
    client.begin(stuck);
    BeginRequest unknown{"k-unknown", "refund",
                         "o-2",       "refund",
                         {},          TriggerSource::Initial,
                         "{}",        std::chrono::milliseconds(60'000),
                         {},          {}};
    client.begin(unknown);
    QVERIFY(client.markUnknown("k-unknown", 1, "response lost").ok());
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_records{biz_type=\"payment\",status=\"PROCESSING\"}"),
             std::optional(1.0));
    QCOMPARE(value(s, "idempotency_records{biz_type=\"refund\",status=\"UNKNOWN\"}"),
             std::optional(1.0));
    QCOMPARE(value(s, "idempotency_records{biz_type=\"refund\",status=\"PROCESSING\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_stuck_records{biz_type=\"payment\"}"), std::optional(1.0));
    QCOMPARE(value(s, "idempotency_stuck_records{biz_type=\"refund\"}"), std::optional(0.0));
    QVERIFY(*value(s, "idempotency_oldest_unsettled_age_seconds{status=\"UNKNOWN\"}") >= 0);

    QVERIFY(client.complete("k-unknown", 2, "{}").ok());
    QVERIFY(client.fail("k-stuck", 1, "declined").ok());
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    QCOMPARE(value(s, "idempotency_records{biz_type=\"refund\",status=\"UNKNOWN\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_stuck_records{biz_type=\"payment\"}"), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_oldest_unsettled_age_seconds{status=\"UNKNOWN\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_oldest_unsettled_age_seconds{status=\"PROCESSING\"}"),
             std::optional(0.0));
  }

  void reconciliationFindsDebitsWithoutSuccessAndSuccessesWithoutDebit() {
    auto options = testOptions(db_->dsn());
    options.reconcileGrace = std::chrono::milliseconds(0);
    RunningExporter e(options);
    auto c = db_->connect();
    ProtocolClient client(*c);
    // Money moved for o-1, but its record failed: a blind retry would charge twice.
    client.begin({"k-1",
                  "payment",
                  "o-1",
                  "pay",
                  {},
                  TriggerSource::Initial,
                  "{}",
                  std::chrono::milliseconds(30'000),
                  {},
                  {}});
    QVERIFY(client.fail("k-1", 1, "timeout").ok());
    client.recordFundFlow(
        {"payment", "o-1", FundFlowKind::Debit, 2990, "CNY", "gw-1", std::string("k-1")});
    // o-2 succeeded without any DEBIT.
    client.begin({"k-2",
                  "payment",
                  "o-2",
                  "pay",
                  {},
                  TriggerSource::Initial,
                  "{}",
                  std::chrono::milliseconds(30'000),
                  {},
                  {}});
    QVERIFY(client.complete("k-2", 1, "{}").ok());
    // o-3 is consistent; a refund debit is not a biz type that moves money here.
    client.begin({"k-3",
                  "payment",
                  "o-3",
                  "pay",
                  {},
                  TriggerSource::Initial,
                  "{}",
                  std::chrono::milliseconds(30'000),
                  {},
                  {}});
    QVERIFY(client.complete("k-3", 1, "{}").ok());
    client.recordFundFlow(
        {"payment", "o-3", FundFlowKind::Debit, 100, "CNY", "gw-3", std::string("k-3")});
    client.recordFundFlow({"refund", "r-1", FundFlowKind::Debit, 100, "CNY", "gw-r1", {}});
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"debit_without_success\"}"),
             std::optional(1.0));
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"success_without_debit\"}"),
             std::optional(1.0));
  }

  void collectionBlockedOnALockDoesNotHoldUpMetrics() {
    auto options = testOptions(db_->dsn());
    options.statementTimeout = std::chrono::seconds(60);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    auto locker = db_->connect();
    pqxx::work lock(*locker);
    lock.exec("LOCK TABLE idem.attempts IN ACCESS EXCLUSIVE MODE");
    // Wait until the exporter's statement is really waiting on that lock.
    QVERIFY(waitUntil(
        [&] {
          return db_->scalar(
                     "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                     "'idemwatch-exporter' "
                     "AND wait_event_type = 'Lock' AND datname = current_database()") == 1;
        },
        std::chrono::seconds(10)));
    const std::uint64_t collectionsWhileBlocked = e.exporter().collections();
    for (int i = 0; i < 5; ++i) {
      const HttpAnswer a = httpGet({e.url(), {}, {}, std::chrono::milliseconds(5000)});
      QCOMPARE(a.status, 200);
      QVERIFY2(a.elapsed < std::chrono::milliseconds(500),
               "a scrape answers at once while a collection waits");
      QCOMPARE(value(parseMetrics(a.body), "idempotency_exporter_db_up"), std::optional(1.0));
    }
    QCOMPARE(e.exporter().collections(), collectionsWhileBlocked);  // it was blocked all along
    lock.abort();
    QVERIFY(e.waitForCollections(1));
  }

  void statementTimeoutEndsABlockedCollectionAndNothingIsLost() {
    auto options = testOptions(db_->dsn());
    options.statementTimeout = std::chrono::milliseconds(300);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    ProtocolClient client(*c);
    client.begin({"k-1",
                  "payment",
                  "o-1",
                  "pay",
                  {},
                  TriggerSource::Initial,
                  "{}",
                  std::chrono::milliseconds(30'000),
                  {},
                  {}});
    {
      auto locker = db_->connect();
      pqxx::work lock(*locker);
      lock.exec("LOCK TABLE idem.attempts IN ACCESS EXCLUSIVE MODE");
      // The blocked statement is cancelled by the timeout: an error of that stage, the
      // connection stays up, the collections go on.
      QVERIFY(waitUntil([&] {
        return value(e.scrape(), "idempotency_exporter_collect_errors_total{stage=\"requests\"}") >=
               std::optional(2.0);
      }));
      const Series s = e.scrape();
      QCOMPARE(value(s, "idempotency_exporter_db_up"), std::optional(1.0));
      QCOMPARE(value(s, "idempotency_exporter_collect_errors_total{stage=\"connect\"}"),
               std::optional(0.0));
      lock.abort();
    }
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(value(e.scrape(), requestsKey("payment", "initial", "executed")), std::optional(1.0));
  }
};

QTEST_GUILESS_MAIN(TestExporterCounts)
#include "tst_exporter_counts.moc"

// The exporter's figures against what SQL counts in the same tables: simulated traffic with a
// fixed seed, every counter series and the three ratios equal (not close); the state gauges and
// reconciliation; purging old rows never moves a counter back and keeps the unsettled records'
// history, and a key retention retired is counted as `retired`, a hit; the reconciler's and the
// operator's decisions are counted by actor kind; the transitions series from the start are the
// database's own state machine; overcharges still owed fall back to 0 once refunded; the biz_type
// label is bounded by --max-biz-types; a start reads only the ratio window; promtool accepts the
// output, with zeros for every known label value before traffic; a collection blocked on a lock
// does not hold up /metrics.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>
#include <pqxx/pqxx>
#include <set>

#include "exporter_harness.hpp"
#include "idem/build_info.hpp"
#include "idem/protocol_client.hpp"
#include "idem/vocabulary.hpp"
#include "metric_keys.hpp"
#include "simulator.hpp"
#include "sql_truth.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

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

// The state machine as the database states it: the idempotency_transitions_total key of every
// (from, to, actor_kind) of the vocabulary that idem.transition_allowed accepts.
std::set<std::string> allowedTransitionKeys(const TestDatabase& db) {
  auto c = db.connect();
  pqxx::nontransaction tx(*c);
  std::set<std::string> out;
  std::vector<std::optional<std::string>> froms{std::nullopt};
  for (RecordStatus st : allValues<RecordStatus>()) froms.emplace_back(format(st));
  for (const auto& from : froms) {
    for (RecordStatus to : allValues<RecordStatus>()) {
      for (ActorKind actor : allValues<ActorKind>()) {
        const std::string toText(format(to)), actorText(format(actor));
        if (tx.exec_params1("SELECT idem.transition_allowed($1, $2, $3)", from, toText,
                            actorText)[0]
                .as<bool>(false)) {
          out.insert(transitionsKey(from.value_or("none"), toText, actorText));
        }
      }
    }
  }
  return out;
}

std::set<std::string> transitionKeysOf(const Series& s) {
  std::set<std::string> out;
  for (const auto& [key, v] : s) {
    if (key.starts_with("idempotency_transitions_total{")) out.insert(key);
  }
  return out;
}

BeginRequest beginRequest(const std::string& key, const std::string& bizType,
                          const std::string& bizId,
                          std::chrono::milliseconds lease = std::chrono::milliseconds(30'000)) {
  return payRequest(key, bizId, bizType, lease);
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

  Truth sqlRequests() { return test::sqlRequests(*db_); }
  Truth sqlFundFlows() { return test::sqlFundFlows(*db_); }
  Truth sqlDuplicates() { return test::sqlDuplicates(*db_); }
  Truth sqlTransitions() { return test::sqlTransitions(*db_); }

  // The three figures over all rows, computed as the exporter must: hits / all, retries of a
  // source / all, duplicates / all flows.
  void compareRatios(const std::vector<prometheus::MetricFamily>& families) {
    const double all = scalar("SELECT count(*) FROM idem.attempts");
    const double hits =
        scalar("SELECT count(*) FROM idem.attempts WHERE outcome IN (" + hitOutcomesSql() + ")");
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

  // Retention removes history a whole day at a time: everything so far, moved two days back, is
  // past a purge of one day (rows of a day no partition covers are removed one by one).
  void purgeEverythingSettled() {
    for (const std::string table : {"records", "attempts", "transitions"}) {
      const std::string trigger = table == "records" ? "records_guard" : table + "_append_only";
      const std::string updated =
          table == "records" ? ", updated_at = updated_at - interval '2 days'" : "";
      db_->exec("ALTER TABLE idem." + table + " DISABLE TRIGGER " + trigger + "; UPDATE idem." +
                table + " SET created_at = created_at - interval '2 days'" + updated +
                "; ALTER TABLE idem." + table + " ENABLE TRIGGER " + trigger);
    }
    db_->exec("SELECT * FROM idem.purge('1 day')");
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
    // Who recorded the flows: the agents' own reports and the gateway's, both in this traffic.
    compareFamily(scraped, "idempotency_fund_flows_recorded_total", test::sqlRecorders(*db_));
    for (const char* by : {"claimant", "ledger"}) {
      QVERIFY2(scalar(std::string("SELECT count(*) FROM idem.fund_flows WHERE recorded_by = '") +
                      by + "'") > 0,
               by);
    }
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

  // Retention (schema v2): idem.purge removes settled records and their history, leaving a
  // tombstone per record, and never touches an unsettled record's attempts or transitions. The
  // counters never go back, and afterwards count exactly the rows added since.
  void purgeNeverMovesCountersBackAndKeepsTheUnsettledHistory() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    sim::simulate(traffic(*db_, "before", 300), stop_);
    QVERIFY(e.waitForCollections(2));
    const Series before = e.scrape();
    const double requestsBefore = scalar("SELECT count(*) FROM idem.attempts");
    const double transitionsBefore = scalar("SELECT count(*) FROM idem.transitions");
    const double lastAttempt = scalar("SELECT max(id) FROM idem.attempts");
    const double lastTransition = scalar("SELECT max(id) FROM idem.transitions");
    const std::string settled = "status IN ('SUCCESS', 'FAILED')";
    const double settledBefore = scalar("SELECT count(*) FROM idem.records WHERE " + settled);
    const std::string unsettledHistory =
        "(SELECT count(*) FROM idem.attempts a JOIN idem.records r USING (idempotency_key) "
        "  WHERE r.status IN ('PROCESSING', 'UNKNOWN')) + "
        "(SELECT count(*) FROM idem.transitions t JOIN idem.records r USING (idempotency_key) "
        "  WHERE r.status IN ('PROCESSING', 'UNKNOWN'))";
    const double unsettledHistoryBefore = scalar("SELECT " + unsettledHistory);
    QVERIFY2(unsettledHistoryBefore > 0, "the traffic left unsettled records (lost responses)");
    QVERIFY(settledBefore > 0);

    purgeEverythingSettled();
    QCOMPARE(scalar("SELECT count(*) FROM idem.records WHERE " + settled), 0.0);
    QCOMPARE(scalar("SELECT count(*) FROM idem.retired_keys"), settledBefore);
    QCOMPARE(scalar("SELECT " + unsettledHistory), unsettledHistoryBefore);
    QVERIFY(scalar("SELECT count(*) FROM idem.attempts") < requestsBefore);
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
    QCOMPARE(requests, requestsBefore + scalar("SELECT count(*) FROM idem.attempts WHERE id > " +
                                               std::to_string(std::int64_t(lastAttempt))));
    QCOMPARE(transitions,
             transitionsBefore + scalar("SELECT count(*) FROM idem.transitions WHERE id > " +
                                        std::to_string(std::int64_t(lastTransition))));
    compareFamily(after, "idempotency_fund_flows_total", sqlFundFlows());
  }

  // A retry under a key whose record retention removed is stopped by its tombstone: outcome
  // `retired`, counted under that outcome and as a hit of the hit ratio.
  void retiredKeyIsCountedAsRetiredAndAsAHit() {
    auto options = testOptions(db_->dsn());
    options.ratioWindow = std::chrono::hours(1);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    ProtocolClient client(*c);
    const BeginResult paid = client.begin(beginRequest("k-paid", "payment", "o-paid"));
    QVERIFY(
        client.complete("k-paid", 1, R"({"gateway_ref": "gw-1"})", paid.claimToken.value()).ok());
    const BeginResult declined = client.begin(beginRequest("k-declined", "payment", "o-declined"));
    QVERIFY(client.fail("k-declined", 1, "card declined", declined.claimToken.value()).ok());
    QVERIFY(e.waitForCollections(2));  // counted before retention removes them
    const Truth counted = sqlRequests();
    purgeEverythingSettled();
    QCOMPARE(scalar("SELECT count(*) FROM idem.retired_keys"), 2.0);

    BeginRequest retry = beginRequest("k-paid", "payment", "o-paid");
    retry.source = TriggerSource::Llm;
    QCOMPARE(client.begin(retry).outcome, Outcome::Retired);
    retry = beginRequest("k-declined", "payment", "o-declined");
    retry.source = TriggerSource::Http;
    QCOMPARE(client.begin(retry).outcome, Outcome::Retired);
    QVERIFY(e.waitForCollections(2));

    const Series s = e.scrape();
    QCOMPARE(value(s, requestsKey("payment", "llm", "retired")), std::optional(1.0));
    QCOMPARE(value(s, requestsKey("payment", "http", "retired")), std::optional(1.0));
    compareFamily(s, "idempotency_requests_total", plus(counted, sqlRequests()));
    // 4 requests, 2 answered by the layer without calling downstream.
    const std::optional<double> hitRatio =
        familyValue(e.exporter().collect(), "idempotency_hit_ratio");
    QVERIFY2(hitRatio == std::optional(0.5),
             ("hit ratio " + std::to_string(hitRatio.value_or(-1)) + ", SQL counts " +
              std::to_string(scalar("SELECT count(*) FROM idem.attempts")) + " requests left")
                 .c_str());
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
    // The transitions of the state machine, reconciler and correction included; none other.
    const std::set<std::string> allowed = allowedTransitionKeys(*db_);
    for (const std::string& key : allowed) {
      QVERIFY2(value(s, key) == std::optional(0.0), key.c_str());
    }
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "SUCCESS", "reconciler")), std::optional(0.0));
    QCOMPARE(value(s, transitionsKey("FAILED", "SUCCESS", "operator")), std::optional(0.0));
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "FAILED", "system")), std::nullopt);
    QCOMPARE(transitionKeysOf(s), allowed);
    QCOMPARE(allowed.size(), std::size_t(15));  // schema contract v2's table
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
    QCOMPARE(value(s, std::string("idempotency_exporter_build_info{version=\"") + idem::kVersion +
                          "\",revision=\"" + idem::buildRevision() + "\"}"),
             std::optional(1.0));

    const std::string problems = promtoolProblems(answer.body);
    QVERIFY2(problems.empty(), problems.c_str());
  }

  // The series from the start are the database's state machine, read by the exporter's own role:
  // idem_reader may ask idem.transition_allowed (sql/migrations/010), and the exporter keeps no
  // copy of it.
  void transitionSeriesAreTheDatabasesStateMachine() {
    const std::string reader = db_->createLoginRole("exporter", "idem_reader");
    RunningExporter e(testOptions(db_->dsnAs(reader)));
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_exporter_db_up"), std::optional(1.0));
    QCOMPARE(transitionKeysOf(s), allowedTransitionKeys(*db_));
  }

  // The decisions of v2: the reconciler's (resolve, reconcile) and the operator's, a correction
  // FAILED -> SUCCESS among them, each under its actor kind, equal to SQL's counts.
  void reconcilerAndOperatorDecisionsAreCountedByActorKind() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    ProtocolClient client(*c);
    auto unknown = [&](const std::string& key) {
      const BeginResult b = client.begin(beginRequest(key, "payment", "o-" + key));
      QVERIFY(b.claimToken);
      QVERIFY(client.markUnknown(key, 1, "gateway timeout", *b.claimToken).ok());
    };
    // The reconciler, from a gateway lookup.
    unknown("k-resolved-paid");
    QVERIFY(client
                .resolve("k-resolved-paid", 2, RecordStatus::Success, "gateway lookup",
                         R"({"gateway_ref": "gw-r1"})")
                .ok());
    unknown("k-resolved-unpaid");
    QVERIFY(client
                .resolve("k-resolved-unpaid", 2, RecordStatus::Failed, "gateway has no charge",
                         R"({"lookup": "none"})")
                .ok());
    // reconcile: a PROCESSING record past its lease whose own key has a DEBIT.
    const BeginResult stuck = client.begin(
        beginRequest("k-stuck-paid", "payment", "o-stuck-paid", std::chrono::milliseconds(1)));
    QVERIFY(stuck.claimToken);
    client.recordFundFlow({"payment", "o-stuck-paid", FundFlowKind::Debit, 100, "CNY", "gw-s1",
                           std::string("k-stuck-paid")});
    QTest::qWait(20);
    QCOMPARE(client.reconcile(), 1);
    // The operator: UNKNOWN -> FAILED, and a correction of a FAILED record whose money moved.
    unknown("k-settled");
    QVERIFY(client.settle("k-settled", 2, RecordStatus::Failed, "gateway: no charge", std::nullopt)
                .ok());
    const BeginResult declined = client.begin(beginRequest("k-corrected", "payment", "o-corr"));
    QVERIFY(client.fail("k-corrected", 1, "declined", declined.claimToken.value()).ok());
    QVERIFY(client
                .settle("k-corrected", 2, RecordStatus::Success,
                        "statement shows the charge after all", R"({"statement": "S-7"})")
                .ok());
    QVERIFY(e.waitForCollections(2));

    const Series s = e.scrape();
    compareFamily(s, "idempotency_transitions_total", sqlTransitions());
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "SUCCESS", "reconciler")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "FAILED", "reconciler")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("PROCESSING", "SUCCESS", "reconciler")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("UNKNOWN", "FAILED", "operator")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("FAILED", "SUCCESS", "operator")), std::optional(1.0));
    QCOMPARE(value(s, transitionsKey("none", "PROCESSING", "system")), std::optional(5.0));
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
    const BeginResult stuckClaim = client.begin(stuck);
    QVERIFY(stuckClaim.claimToken);
    BeginRequest unknown{"k-unknown", "refund",
                         "o-2",       "refund",
                         {},          TriggerSource::Initial,
                         "{}",        std::chrono::milliseconds(60'000),
                         {},          {}};
    const BeginResult unknownClaim = client.begin(unknown);
    QVERIFY(unknownClaim.claimToken);
    QVERIFY(client.markUnknown("k-unknown", 1, "response lost", *unknownClaim.claimToken).ok());
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

    QVERIFY(client.complete("k-unknown", 2, "{}", *unknownClaim.claimToken).ok());
    QVERIFY(client.fail("k-stuck", 1, "declined", *stuckClaim.claimToken).ok());
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
    const BeginResult c1 = client.begin(beginRequest("k-1", "payment", "o-1"));
    QVERIFY(client.fail("k-1", 1, "timeout", c1.claimToken.value()).ok());
    client.recordFundFlow(
        {"payment", "o-1", FundFlowKind::Debit, 2990, "CNY", "gw-1", std::string("k-1")});
    // o-2 succeeded without any DEBIT.
    const BeginResult c2 = client.begin(beginRequest("k-2", "payment", "o-2"));
    QVERIFY(client.complete("k-2", 1, "{}", c2.claimToken.value()).ok());
    // o-3 is consistent; a refund debit is not a biz type that moves money here.
    const BeginResult c3 = client.begin(beginRequest("k-3", "payment", "o-3"));
    QVERIFY(client.complete("k-3", 1, "{}", c3.claimToken.value()).ok());
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

  // Money moves by DEBIT or CAPTURE (a FREEZE hold captured); and a SUCCESS record that retention
  // removed leaves a tombstone that still says the business object succeeded.
  void reconciliationCountsCapturesAndTombstonesOfPurgedSuccesses() {
    auto options = testOptions(db_->dsn());
    options.reconcileGrace = std::chrono::milliseconds(0);
    RunningExporter e(options);
    auto c = db_->connect();
    ProtocolClient client(*c);
    // o-held: captured after a hold, the response lost: money moved without SUCCESS.
    const BeginResult held = client.begin(beginRequest("k-held", "payment", "o-held"));
    QVERIFY(client.markUnknown("k-held", 1, "gateway timeout", held.claimToken.value()).ok());
    client.recordFundFlow(
        {"payment", "o-held", FundFlowKind::Freeze, 500, "CNY", "gw-h1", std::string("k-held")});
    client.recordFundFlow(
        {"payment", "o-held", FundFlowKind::Capture, 500, "CNY", "gw-h2", std::string("k-held")});
    // o-captured: SUCCESS with a CAPTURE and no DEBIT is consistent.
    const BeginResult captured = client.begin(beginRequest("k-captured", "payment", "o-captured"));
    QVERIFY(client.complete("k-captured", 1, "{}", captured.claimToken.value()).ok());
    client.recordFundFlow({"payment", "o-captured", FundFlowKind::Capture, 700, "CNY", "gw-c1",
                           std::string("k-captured")});
    // o-paid: SUCCESS with a DEBIT, to be purged.
    const BeginResult paid = client.begin(beginRequest("k-paid", "payment", "o-paid"));
    QVERIFY(client.complete("k-paid", 1, "{}", paid.claimToken.value()).ok());
    client.recordFundFlow(
        {"payment", "o-paid", FundFlowKind::Debit, 900, "CNY", "gw-p1", std::string("k-paid")});
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"debit_without_success\"}"),
             std::optional(1.0));
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"success_without_debit\"}"),
             std::optional(0.0));

    QTest::qWait(5);
    db_->exec("SELECT * FROM idem.purge('1 microsecond')");
    QCOMPARE(scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS'"), 0.0);
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    QCOMPARE(value(s, "idempotency_reconciliation_mismatches{kind=\"debit_without_success\"}"),
             std::optional(1.0));
  }

  // Overcharges still owed (metrics contract v2): charges beyond an object's first, less its
  // refunds, within one currency; back to 0 once refunded, the currency's series kept.
  void overchargesFallBackToZeroOnceRefunded() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    const std::string objects = "idempotency_overcharged_business_objects{biz_type=\"payment\"}";
    auto amount = [](const std::string& currency) {
      return "idempotency_overcharged_amount_minor{biz_type=\"payment\",currency=\"" + currency +
             "\"}";
    };
    QCOMPARE(value(e.scrape(), objects), std::optional(0.0));

    auto c = db_->connect();
    ProtocolClient client(*c);
    auto flow = [&](const std::string& biz, const std::string& bizId, FundFlowKind kind,
                    std::int64_t amountMinor, const std::string& currency, const std::string& ref) {
      client.recordFundFlow({biz, bizId, kind, amountMinor, currency, ref, {}});
    };
    flow("payment", "o-twice", FundFlowKind::Debit, 1000, "CNY", "gw-1");
    flow("payment", "o-twice", FundFlowKind::Debit, 1000, "CNY", "gw-2");
    flow("payment", "o-held", FundFlowKind::Freeze, 500, "CNY",
         "gw-3");  // a hold, then its capture
    flow("payment", "o-held", FundFlowKind::Capture, 500, "CNY", "gw-4");
    flow("payment", "o-mixed", FundFlowKind::Debit, 300, "EUR", "gw-5");
    flow("payment", "o-mixed", FundFlowKind::Capture, 300, "EUR", "gw-6");
    flow("payment", "o-mixed", FundFlowKind::Debit, 100, "USD", "gw-7");
    flow("refund", "r-1", FundFlowKind::Debit, 100, "CNY", "gw-8");  // not a money-moving biz type
    flow("refund", "r-1", FundFlowKind::Debit, 100, "CNY", "gw-9");
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    QCOMPARE(value(s, objects), std::optional(2.0));  // o-mixed once, in two currencies
    QCOMPARE(value(s, amount("CNY")), std::optional(1000.0));
    QCOMPARE(value(s, amount("EUR")), std::optional(300.0));
    QCOMPARE(value(s, amount("USD")), std::optional(100.0));
    QCOMPARE(value(s, "idempotency_overcharged_business_objects{biz_type=\"refund\"}"),
             std::nullopt);

    flow("payment", "o-twice", FundFlowKind::Refund, 1000, "CNY", "gw-10");
    flow("payment", "o-mixed", FundFlowKind::Refund, 100, "USD", "gw-11");
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    QCOMPARE(value(s, objects), std::optional(1.0));
    QCOMPARE(value(s, amount("CNY")), std::optional(0.0));
    QCOMPARE(value(s, amount("EUR")), std::optional(300.0));
    QCOMPARE(value(s, amount("USD")), std::optional(0.0));
    flow("payment", "o-mixed", FundFlowKind::Refund, 300, "EUR", "gw-12");
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    QCOMPARE(value(s, objects), std::optional(0.0));
    QCOMPARE(value(s, amount("EUR")), std::optional(0.0));
  }

  // The biz_type label is bounded (--max-biz-types, first come first kept, the money-moving ones
  // always kept): the rows of further biz types count under "other" and in the overflow counter.
  void bizTypesBeyondTheBoundAreCountedAsOther() {
    auto options = testOptions(db_->dsn());
    options.maxBizTypes = 2;
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    QCOMPARE(value(e.scrape(), "idempotency_exporter_biz_types_overflow_total"),
             std::optional(0.0));
    auto c = db_->connect();
    ProtocolClient client(*c);
    auto claim = [&](const std::string& biz, const std::string& key) {
      QCOMPARE(client.begin(beginRequest(key, biz, "o-" + key)).outcome, Outcome::Executed);
    };
    claim("b1", "k-1");
    claim("b2", "k-2");
    claim("payment", "k-p");
    QVERIFY(e.waitForCollections(2));  // b1 and b2 came first: kept
    claim("b3", "k-3");
    claim("b4", "k-4");
    claim("b4", "k-5");
    client.recordFundFlow({"b3", "o-k-3", FundFlowKind::Debit, 100, "CNY", "gw-3", {}});
    client.recordFundFlow({"b1", "o-k-1", FundFlowKind::Debit, 100, "CNY", "gw-1", {}});
    QVERIFY(e.waitForCollections(2));

    const Series s = e.scrape();
    for (const char* biz : {"b1", "b2", "payment"}) {
      QCOMPARE(value(s, requestsKey(biz, "initial", "executed")), std::optional(1.0));
    }
    QCOMPARE(value(s, requestsKey("other", "initial", "executed")), std::optional(3.0));
    QCOMPARE(value(s, requestsKey("b3", "initial", "executed")), std::nullopt);
    QCOMPARE(value(s, fundFlowsKey("other", "DEBIT")), std::optional(1.0));
    QCOMPARE(value(s, fundFlowsKey("b1", "DEBIT")), std::optional(1.0));
    QCOMPARE(value(s, "idempotency_records{biz_type=\"other\",status=\"PROCESSING\"}"),
             std::optional(3.0));
    QCOMPARE(value(s, "idempotency_exporter_biz_types_overflow_total"), std::optional(4.0));
    std::set<std::string> labels;
    for (const auto& [key, v] : s) {
      const auto at = key.find("biz_type=\"");
      if (at == std::string::npos) continue;
      labels.insert(key.substr(at + 10, key.find('"', at + 10) - at - 10));
    }
    QCOMPARE(labels, (std::set<std::string>{"b1", "b2", "other", "payment"}));
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
    client.begin(beginRequest("k-1", "payment", "o-1"));
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

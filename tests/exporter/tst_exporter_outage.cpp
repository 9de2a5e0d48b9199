// PostgreSQL stops under a running exporter and starts again: /metrics keeps answering, reports
// the outage (db_up 0, connect errors), the exporter reconnects and ends with the exact counts,
// having lost and double-counted nothing. And PostgreSQL crashes with writes in flight, whose ids
// the exporter has seen as gaps: the counts and the reconciliation's open questions stay exact.
// Its own cluster, since the test stops it.
#include <QtTest>
#include <array>
#include <pqxx/pqxx>

#include "exporter_harness.hpp"
#include "idem/migrations.hpp"
#include "metric_keys.hpp"
#include "pg_cluster.hpp"
#include "simulator.hpp"

using namespace idem;
using namespace idem::test;

class TestExporterOutage : public QObject {
  Q_OBJECT
  std::unique_ptr<PgCluster> cluster_;
  std::string dsn_;
  std::atomic<bool> stop_{false};

  // The rows of the counted tables: attempts, transitions, fund flows.
  std::array<double, 3> rows() {
    return {scalar("SELECT count(*) FROM idem.attempts"),
            scalar("SELECT count(*) FROM idem.transitions"),
            scalar("SELECT count(*) FROM idem.fund_flows")};
  }

  // Every counter's total equals the rows its table gained since `before` (read on a still
  // database before the exporter started); the reconciliation equals its definitions.
  void expectExact(const Series& s, const exporter::ExporterOptions& o,
                   const std::array<double, 3>& before) {
    double requests = 0, transitions = 0, flows = 0;
    for (const auto& [key, v] : s) {
      if (key.starts_with("idempotency_requests_total{")) requests += v;
      if (key.starts_with("idempotency_transitions_total{")) transitions += v;
      if (key.starts_with("idempotency_fund_flows_total{")) flows += v;
    }
    const std::array<double, 3> now = rows();
    QCOMPARE(requests, now[0] - before[0]);
    QCOMPARE(transitions, now[1] - before[1]);
    QCOMPARE(flows, now[2] - before[2]);
    const std::string parameters = "('{payment}', '" + std::to_string(o.reconcileWindow.count()) +
                                   " ms', '" + std::to_string(o.reconcileGrace.count()) + " ms')";
    QCOMPARE(value(s, kDebitWithoutSuccessKey),
             std::optional(
                 scalar("SELECT count(*) FROM idem.money_moved_without_success" + parameters)));
    QCOMPARE(value(s, kSuccessWithoutDebitKey),
             std::optional(
                 scalar("SELECT count(*) FROM idem.success_without_money_moved" + parameters)));
  }

  double scalar(const std::string& sql) {
    pqxx::connection c(dsn_);
    pqxx::nontransaction tx(c);
    return tx.exec1(sql)[0].as<double>();
  }

  void traffic(const std::string& runId) {
    sim::SimulationConfig c;
    c.connection.dsn = dsn_;
    c.connection.source = "test";
    c.agents = 3;
    c.seed = 11;
    c.operations = 300;
    c.runId = runId;
    c.doubleChargeRate = 0.05;
    sim::simulate(c, stop_);
  }

 private slots:
  void initTestCase() {
    cluster_ = std::make_unique<PgCluster>();
    {
      pqxx::connection c(cluster_->dsn().toStdString());
      pqxx::nontransaction tx(c);
      tx.exec("CREATE DATABASE outage");
    }
    dsn_ = cluster_->dsn(QStringLiteral("outage")).toStdString();
    pqxx::connection c(dsn_);
    migrate(c, bundledMigrations());
  }

  void survivesAPostgresRestartWithExactCounts() {
    const std::array<double, 3> before = rows();
    RunningExporter e(testOptions(dsn_));
    QVERIFY(e.waitForCollections(1));
    traffic("before");
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(value(e.scrape(), "idempotency_exporter_db_up"), std::optional(1.0));

    cluster_->stop();
    // It keeps serving and says the database is gone.
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), "idempotency_exporter_db_up") == std::optional(0.0); }));
    QVERIFY(waitUntil([&] {
      return *value(e.scrape(), "idempotency_exporter_collect_errors_total{stage=\"connect\"}") >=
             1;
    }));
    const HttpAnswer during = httpGet({e.url(), {}, {}, std::chrono::milliseconds(5000)});
    QCOMPARE(during.status, 200);
    QVERIFY(during.elapsed < std::chrono::milliseconds(500));

    cluster_->start();
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), "idempotency_exporter_db_up") == std::optional(1.0); },
        std::chrono::seconds(60)));
    traffic("after");
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    expectExact(s, testOptions(dsn_), before);
    QCOMPARE(value(s, duplicatesKey("payment", "DEBIT")),
             std::optional(scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT "
                                  "NULL AND biz_type = 'payment' AND kind = 'DEBIT'")));
  }

  void survivesACrashWithWritesInFlight() {
    auto options = testOptions(dsn_);
    options.reconcileGrace = std::chrono::milliseconds(0);
    const std::array<double, 3> before = rows();
    RunningExporter e(options);
    // Started (its first collection read where the tables end) before any row is written: rows
    // from before its start are not its to count.
    QVERIFY(e.waitForCollections(1));
    traffic("before-crash");
    QVERIFY(e.waitForCollections(2));
    // A charge and a SUCCESS in flight: their ids are taken, then committed rows pass them.
    pqxx::connection flowing(dsn_), completing(dsn_);
    pqxx::work flow(flowing);
    flow.exec(
        "SELECT idem.record_fund_flow('payment', 'in-flight', 'DEBIT', 100, 'USD', "
        "'gw-in-flight')");
    pqxx::work success(completing);
    success.exec(
        "SELECT idem.begin('in-flight-key', 'payment', 'in-flight-2', 'pay', 'h', 'initial', "
        "NULL)");
    traffic("beside-crash");
    QVERIFY(e.waitForCollections(2));
    cluster_->crash();
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), "idempotency_exporter_db_up") == std::optional(0.0); }));
    cluster_->start();
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), "idempotency_exporter_db_up") == std::optional(1.0); },
        std::chrono::seconds(60)));
    traffic("after-crash");
    QCOMPARE(scalar("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'in-flight'"), 0.0);
    // Once the gaps of the lost writes are proven empty, every count is exact.
    QVERIFY(waitUntil(
        [&] {
          double open = 0;
          for (const auto& [key, v] : e.scrape()) {
            if (key.starts_with("idempotency_exporter_open_gaps{")) open += v;
          }
          return open == 0;
        },
        std::chrono::seconds(60)));
    QVERIFY(e.waitForCollections(2));
    expectExact(e.scrape(), options, before);
  }
};

QTEST_GUILESS_MAIN(TestExporterOutage)
#include "tst_exporter_outage.moc"

// PostgreSQL stops under a running exporter and starts again: /metrics keeps answering, reports
// the outage (db_up 0, connect errors), the exporter reconnects and ends with the exact counts,
// having lost and double-counted nothing. Its own cluster, since the test stops it.
#include <QtTest>
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
    double requests = 0, transitions = 0, flows = 0;
    for (const auto& [key, v] : s) {
      if (key.starts_with("idempotency_requests_total{")) requests += v;
      if (key.starts_with("idempotency_transitions_total{")) transitions += v;
      if (key.starts_with("idempotency_fund_flows_total{")) flows += v;
    }
    QCOMPARE(requests, scalar("SELECT count(*) FROM idem.attempts"));
    QCOMPARE(transitions, scalar("SELECT count(*) FROM idem.transitions"));
    QCOMPARE(flows, scalar("SELECT count(*) FROM idem.fund_flows"));
    QCOMPARE(value(s, duplicatesKey("payment", "DEBIT")),
             std::optional(scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT "
                                  "NULL AND biz_type = 'payment' AND kind = 'DEBIT'")));
  }
};

QTEST_GUILESS_MAIN(TestExporterOutage)
#include "tst_exporter_outage.moc"

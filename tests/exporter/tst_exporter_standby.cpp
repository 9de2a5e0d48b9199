// The exporter pointed at a streaming hot standby: a transaction on the primary that holds a lower
// id across collections is counted when it commits (pg_locks on the standby shows none of the
// primary's writers, so the gap's proof must come from what the standby replays); rolled-back and
// ON CONFLICT ids and a burst of concurrent writers leave the counters equal to SQL on the primary;
// the replay lag is published; and a promotion under the running exporter keeps them exact.
#include <QtTest>
#include <pqxx/pqxx>
#include <thread>

#include "exporter_harness.hpp"
#include "idem/protocol_client.hpp"
#include "incremental_reader.hpp"
#include "metric_keys.hpp"
#include "pg_cluster.hpp"
#include "read_stats.hpp"
#include "sql_truth.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

constexpr const char* kBeginSql =
    "SELECT * FROM idem.begin($1, 'payment', $2, 'pay', NULL, 'initial', '{}'::jsonb)";

BeginRequest request(const std::string& key) {
  return {key,        "payment",
          "o-" + key, "pay",
          {},         TriggerSource::Initial,
          "{}",       std::chrono::milliseconds(30'000),
          {},         {}};
}

double sumOf(const Series& s, const std::string& family) {
  double total = 0;
  for (const auto& [key, v] : s) {
    if (key.starts_with(family + "{")) total += v;
  }
  return total;
}

// The server TestDatabase creates its databases on, and connects to: the suite's own primary
// (a standby needs a cluster of its own), later the promoted standby.
void serveTestDatabasesFrom(const PgCluster& cluster) {
  qputenv("IDEMWATCH_TEST_DSN", QStringLiteral("host=%1 port=%2 user=postgres")
                                    .arg(cluster.socketDir())
                                    .arg(cluster.port())
                                    .toLocal8Bit());
}

}  // namespace

class TestExporterStandby : public QObject {
  Q_OBJECT
  std::unique_ptr<PgCluster> primary_;
  std::unique_ptr<PgCluster> standby_;
  std::unique_ptr<TestDatabase> db_;

  std::string standbyDsn() const {
    return standby_->dsn(QString::fromStdString(db_->name())).toStdString();
  }

  void beginCommitted(int from, int to) {
    auto c = db_->connect();
    ProtocolClient client(*c);
    for (int i = from; i < to; ++i) client.begin(request("k" + std::to_string(i)));
  }

  // Once the standby has replayed everything and the exporter collected after it: every counter
  // equals SQL on the primary.
  void expectExact(RunningExporter& e) {
    standby_->waitForCatchUp(*primary_);
    QVERIFY(e.waitForCollections(3));
    const Series s = e.scrape();
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db_));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db_));
    if (db_->scalar("SELECT count(*) FROM idem.fund_flows") > 0) {
      compareFamily(s, "idempotency_fund_flows_total", sqlFundFlows(*db_));
    }
  }

 private slots:
  void initTestCase() {
    primary_ = std::make_unique<PgCluster>();
    serveTestDatabasesFrom(*primary_);
    db_ = std::make_unique<TestDatabase>("tst_exporter_standby");
    standby_ = PgCluster::standbyOf(*primary_);
  }
  void init() {
    db_->reset();
    standby_->waitForCatchUp(*primary_);
  }

  // The first reproduction: one transaction holds a lower id for seconds while 60 others
  // commit. Against the standby the exporter used to count 60 of 61.
  void slowCommitHoldingALowerIdIsCountedOnTheStandby() {
    RunningExporter e(testOptions(standbyDsn()));
    QVERIFY(e.waitForCollections(1));
    auto slowConnection = db_->connect();
    pqxx::work slow(*slowConnection);
    slow.exec_params(kBeginSql, "k-slow", "o-slow");  // the lowest attempt and transition ids
    beginCommitted(0, 60);
    standby_->waitForCatchUp(*primary_);
    QVERIFY(e.waitForCollections(10));  // two seconds of collections with the gap open
    Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 60.0);
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(1.0));
    slow.commit();
    expectExact(e);
    s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 61.0);
    QCOMPARE(value(s, gapsResolvedKey("attempts", "filled")), std::optional(1.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
  }

  // Several slow transactions, each holding a lower id across several collections and
  // committing at a different time, among rolled-back ids, ON CONFLICT ids and a burst of
  // concurrent writers.
  void mixedTrafficCountsEqualSqlOnThePrimary() {
    RunningExporter e(testOptions(standbyDsn()));
    QVERIFY(e.waitForCollections(1));
    std::vector<std::unique_ptr<pqxx::connection>> slowConnections;
    std::vector<std::unique_ptr<pqxx::work>> slow;
    for (int i = 0; i < 3; ++i) {
      slowConnections.push_back(db_->connect());
      slow.push_back(std::make_unique<pqxx::work>(*slowConnections.back()));
      slow.back()->exec_params(kBeginSql, "k-slow" + std::to_string(i),
                               "o-slow" + std::to_string(i));
      beginCommitted(100 * i, 100 * i + 10);
    }
    {
      auto c = db_->connect();
      for (int i = 0; i < 5; ++i) {  // rolled back: ids consumed, no rows
        pqxx::work tx(*c);
        tx.exec_params(kBeginSql, "k-rb" + std::to_string(i), "o-rb" + std::to_string(i));
        tx.abort();
      }
      ProtocolClient client(*c);
      for (int i = 0; i < 5; ++i) {
        const std::string ref = "gw-" + std::to_string(i);
        client.recordFundFlow({"payment", "o-1", FundFlowKind::Debit, 100, "CNY", ref, {}});
        // The gateway reports the same line again: an id consumed by ON CONFLICT DO NOTHING.
        QVERIFY(client.recordFundFlow({"payment", "o-1", FundFlowKind::Debit, 100, "CNY", ref, {}})
                    .alreadyRecorded);
      }
    }
    QVERIFY(e.waitForCollections(3));
    slow[1]->commit();  // the middle one first
    QVERIFY(e.waitForCollections(3));
    std::vector<std::thread> burst;
    for (int t = 0; t < 4; ++t) {
      burst.emplace_back([this, t] { beginCommitted(1000 + 100 * t, 1000 + 100 * t + 40); });
    }
    for (std::thread& t : burst) t.join();
    slow[2]->commit();
    QVERIFY(e.waitForCollections(3));
    slow[0]->commit();
    expectExact(e);
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 3.0 + 30 + 160);
  }

  void replayLagIsPublishedOnTheStandby() {
    RunningExporter e(testOptions(standbyDsn()));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(0, 3);
    standby_->waitForCatchUp(*primary_);
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    const auto lag = value(s, "idempotency_exporter_replay_lag_seconds");
    QVERIFY(lag.has_value());
    QVERIFY(*lag >= 0 && *lag < 30);
    QCOMPARE(value(s, "idempotency_exporter_db_standby"), std::optional(1.0));
    const HttpAnswer landing = httpGet({e.url(QStringLiteral("/")), {}, {}});
    QCOMPARE(landing.status, 200);
    QVERIFY2(landing.body.contains("hot standby"), landing.body.constData());
  }

  // The reader on its own, with a short statement bound: on the standby, a gap whose inserter is
  // still running is kept however long it runs, and so is a rolled-back one below it (the proof
  // waits for every older transaction to end: the standby cannot tell them apart); once the slow
  // one commits, its row is counted late and the rolled-back gap, past the bound, expires.
  void standbyProofExpiresOnlyPermanentGaps() {
    exporter::ReadStats stats({"attempts"});
    exporter::ReaderLimits limits;
    limits.standbyStatementBound = std::chrono::milliseconds(300);
    exporter::IncrementalReader reader(exporter::tableQueries("idem.attempts", "outcome"), limits,
                                       stats.table("attempts"));
    pqxx::connection standby(standbyDsn());
    int late = 0;
    int fresh = 0;
    const auto poll = [&] {
      reader.poll(standby, [&](const pqxx::row&, exporter::RowOrigin origin) {
        if (origin == exporter::RowOrigin::Late) ++late;
        if (origin == exporter::RowOrigin::New) ++fresh;
      });
    };
    // Commits on the primary move the replay on, past the bound.
    const auto trafficAndPolls = [&](int from, int rounds) {
      for (int i = 0; i < rounds; ++i) {
        beginCommitted(from + i, from + i + 1);
        standby_->waitForCatchUp(*primary_);
        QThread::msleep(150);
        poll();
      }
    };
    poll();  // starts
    auto slowConnection = db_->connect();
    pqxx::work slow(*slowConnection);
    slow.exec_params(kBeginSql, "k-slow", "o-slow");
    {
      auto c = db_->connect();
      pqxx::work tx(*c);
      tx.exec_params(kBeginSql, "k-rb", "o-rb");
      tx.abort();
    }
    beginCommitted(0, 3);
    standby_->waitForCatchUp(*primary_);
    poll();
    QCOMPARE(fresh, 3);
    QCOMPARE(reader.openGaps(), std::size_t{2});
    trafficAndPolls(10, 6);  // well past the bound
    QCOMPARE(reader.openGaps(), std::size_t{2});
    QCOMPARE(late, 0);
    slow.commit();
    standby_->waitForCatchUp(*primary_);
    poll();  // the slow one counted late; the rolled-back one's barrier had passed: expired
    QCOMPARE(late, 1);
    QCOMPARE(reader.openGaps(), std::size_t{0});
    QCOMPARE(stats.table("attempts").gapsExpired.load(), std::uint64_t{1});
    QCOMPARE(stats.table("attempts").gapsFilled.load(), std::uint64_t{1});
    QCOMPARE(fresh, 3 + 6);
  }

  // The standby restarts under the running exporter, with a slow transaction on the primary
  // holding a lower id across the restart and more commits while it is down: nothing lost, nothing
  // counted twice.
  void standbyRestartUnderTheRunningExporterStaysExact() {
    RunningExporter e(testOptions(standbyDsn()));
    QVERIFY(e.waitForCollections(1));
    auto slowConnection = db_->connect();
    pqxx::work slow(*slowConnection);
    slow.exec_params(kBeginSql, "k-slow", "o-slow");
    beginCommitted(0, 10);
    standby_->waitForCatchUp(*primary_);
    QVERIFY(e.waitForCollections(3));
    standby_->stop();
    beginCommitted(10, 20);
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), "idempotency_exporter_db_up") == std::optional(0.0); }));
    standby_->start();
    beginCommitted(20, 30);
    expectExact(e);
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 30.0);
    slow.commit();
    expectExact(e);
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 31.0);
  }

  // Last: the standby becomes the primary. A clean failover (caught up, the old primary
  // stopped, promoted) under the running exporter; more traffic on the promoted server, with a
  // slow transaction holding a lower id across collections: still exact.
  void promotionUnderTheRunningExporterStaysExact() {
    RunningExporter e(testOptions(standbyDsn()));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(0, 20);
    expectExact(e);
    primary_->stop();
    standby_->promote();
    serveTestDatabasesFrom(*standby_);  // SQL's truth from now on: the promoted server
    QVERIFY(waitUntil([&] {
      return value(e.scrape(), "idempotency_exporter_db_standby") == std::optional(0.0);
    }));
    auto slowConnection = db_->connect();
    pqxx::work slow(*slowConnection);
    slow.exec_params(kBeginSql, "k-slow", "o-slow");
    beginCommitted(100, 130);
    QVERIFY(e.waitForCollections(5));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 50.0);
    slow.commit();
    QVERIFY(e.waitForCollections(3));
    const Series s = e.scrape();
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db_));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db_));
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 51.0);
    QCOMPARE(value(s, "idempotency_exporter_replay_lag_seconds"), std::nullopt);
  }
};

QTEST_GUILESS_MAIN(TestExporterStandby)
#include "tst_exporter_standby.moc"

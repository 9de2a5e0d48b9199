// The exporter across a failover, with real streaming standbys: a clean failover (the standby had
// every row) keeps the counts going exactly; a failover to a standby that lacked rows already
// counted (as an asynchronous standby does) starts the counts afresh from the new primary, says so,
// and counts what that server then writes, exactly; an exporter moved to a replica that has not
// replayed what it counted waits for it instead; and an exporter reading one replica keeps
// working, exact, through the promotion of another replica.
#include <QtTest>
#include <memory>
#include <pqxx/pqxx>
#include <tuple>

#include "exporter_harness.hpp"
#include "idem/protocol_client.hpp"
#include "metric_keys.hpp"
#include "pg_cluster.hpp"
#include "sql_truth.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

constexpr std::chrono::seconds kFailoverDeadline{90};

// The server TestDatabase creates its databases on and reads SQL's truth from.
void serveTestDatabasesFrom(const PgCluster& cluster) {
  qputenv("IDEMWATCH_TEST_DSN", QStringLiteral("host=%1 port=%2 user=postgres")
                                    .arg(cluster.socketDir())
                                    .arg(cluster.port())
                                    .toLocal8Bit());
}

// libpq's multi-host form: whichever of the servers takes writes, as the C++ programs follow a
// leader.
std::string eitherPrimary(const PgCluster& a, const PgCluster& b, const std::string& dbname) {
  return "host=" + a.socketDir().toStdString() + "," + b.socketDir().toStdString() +
         " port=" + std::to_string(a.port()) + "," + std::to_string(b.port()) +
         " user=postgres dbname=" + dbname + " target_session_attrs=read-write";
}

void beginCommitted(const TestDatabase& db, int from, int to) {
  auto c = db.connect();
  ProtocolClient client(*c);
  for (int i = from; i < to; ++i) {
    const std::string key = "k" + std::to_string(i);
    client.begin({key,
                  "payment",
                  "o-" + key,
                  "pay",
                  {},
                  TriggerSource::Initial,
                  "{}",
                  std::chrono::milliseconds(30'000),
                  {},
                  {}});
  }
}

double sumOf(const Series& s, const std::string& family) {
  double total = 0;
  for (const auto& [key, v] : s) {
    if (key.starts_with(family + "{")) total += v;
  }
  return total;
}

double requests(RunningExporter& e) {
  return sumOf(e.scrape(), "idempotency_requests_total");
}

std::optional<double> gauge(RunningExporter& e, const std::string& name) {
  return value(e.scrape(), name);
}

long long serverTimeline(const TestDatabase& db) {
  return db.scalar(
      "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8");
}

// A primary and its streaming standby, a migrated database on the primary, and an exporter given
// both that reads whichever takes writes.
struct Pair {
  explicit Pair(const std::string& dbname)
      : primary(std::make_unique<PgCluster>()), standby(PgCluster::standbyOf(*primary)) {
    serveTestDatabasesFrom(*primary);
    db = std::make_unique<TestDatabase>(dbname);
    exporter = std::make_unique<RunningExporter>(
        testOptions(eitherPrimary(*primary, *standby, db->name())));
  }
  ~Pair() {
    exporter.reset();
    db.reset();  // while the server it is on runs
  }
  std::unique_ptr<PgCluster> primary;
  std::unique_ptr<PgCluster> standby;
  std::unique_ptr<TestDatabase> db;
  std::unique_ptr<RunningExporter> exporter;
};

// A primary and two streaming replicas, a migrated database on the primary, both replicas caught
// up with it.
struct Replicated {
  explicit Replicated(const std::string& dbname)
      : primary(std::make_unique<PgCluster>()),
        a(PgCluster::standbyOf(*primary)),
        b(PgCluster::standbyOf(*primary)) {
    serveTestDatabasesFrom(*primary);
    db = std::make_unique<TestDatabase>(dbname);
    a->waitForCatchUp(*primary);
    b->waitForCatchUp(*primary);
  }
  ~Replicated() { db.reset(); }  // while a server it may be on runs
  std::unique_ptr<PgCluster> primary;
  std::unique_ptr<PgCluster> a;
  std::unique_ptr<PgCluster> b;
  std::unique_ptr<TestDatabase> db;
};

}  // namespace

class TestExporterFailover : public QObject {
  Q_OBJECT

 private slots:
  // The standby has every row when it is promoted (the old primary stopped cleanly, as with a
  // synchronous standby): the exporter finds every row it counted on the new primary and counts
  // on from where it was, no restart.
  void aFailoverThatKeepsEveryRowCountsOn() {
    Pair pair("tst_exporter_failover_kept");
    PgCluster& primary = *pair.primary;
    auto& standby = pair.standby;
    auto& db = pair.db;
    RunningExporter& e = *pair.exporter;
    QVERIFY(e.waitForCollections(1));
    beginCommitted(*db, 0, 20);
    QVERIFY(waitUntil([&] { return requests(e) == 20.0; }));
    QCOMPARE(gauge(e, "idempotency_exporter_db_timeline"), std::optional(1.0));
    const auto since = gauge(e, "idempotency_exporter_counting_since_timestamp_seconds");
    QVERIFY(since && *since > 0);

    standby->waitForCatchUp(primary);
    primary.stop();
    standby->promote();
    serveTestDatabasesFrom(*standby);
    QCOMPARE(serverTimeline(*db), 2LL);
    QVERIFY(waitUntil(
        [&] { return gauge(e, "idempotency_exporter_db_timeline") == std::optional(2.0); },
        kFailoverDeadline));
    beginCommitted(*db, 20, 30);
    QVERIFY(waitUntil([&] { return requests(e) == 30.0; }));
    QVERIFY(e.waitForCollections(2));  // every collector past the rows, not only the first
    const Series s = e.scrape();
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db));
    QCOMPARE(value(s, "idempotency_exporter_count_restarts_total"), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_counting_since_timestamp_seconds"), since);
  }

  // The standby stopped streaming before the last 15 claims (an asynchronous standby behind);
  // the primary crashes and the standby is promoted without them. The exporter had counted them:
  // it finds them missing, starts its counts afresh (a counter reset) and says so, then counts
  // exactly what the new primary writes.
  void aFailoverThatLostCountedRowsStartsTheCountsAfresh() {
    Pair pair("tst_exporter_failover_lost");
    PgCluster& primary = *pair.primary;
    auto& standby = pair.standby;
    auto& db = pair.db;
    RunningExporter& e = *pair.exporter;
    QVERIFY(e.waitForCollections(1));
    beginCommitted(*db, 0, 10);
    standby->waitForCatchUp(primary);
    standby->stop();
    beginCommitted(*db, 10, 25);
    QVERIFY(waitUntil([&] { return requests(e) == 25.0; }));
    const double before = *gauge(e, "idempotency_exporter_counting_since_timestamp_seconds");

    primary.crash();
    standby->start();
    standby->promote();
    serveTestDatabasesFrom(*standby);
    QCOMPARE(db->scalar("SELECT count(*) FROM idem.attempts"), 10LL);  // 15 claims lost
    QVERIFY(waitUntil(
        [&] { return gauge(e, "idempotency_exporter_count_restarts_total") == std::optional(1.0); },
        kFailoverDeadline));
    const Series restarted = e.scrape();
    QCOMPARE(value(restarted, "idempotency_exporter_db_timeline"), std::optional(2.0));
    QVERIFY(*value(restarted, "idempotency_exporter_counting_since_timestamp_seconds") > before);
    QCOMPARE(sumOf(restarted, "idempotency_requests_total"), 0.0);

    // What the new primary writes from here on is counted exactly, whatever ids its sequences
    // hand out again.
    const auto attempts =
        static_cast<std::int64_t>(db->scalar("SELECT coalesce(max(id), 0) FROM idem.attempts"));
    const auto transitions =
        static_cast<std::int64_t>(db->scalar("SELECT coalesce(max(id), 0) FROM idem.transitions"));
    beginCommitted(*db, 100, 107);
    QVERIFY(waitUntil([&] { return requests(e) == 7.0; }));
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db, attempts));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db, transitions));
    QCOMPARE(value(s, "idempotency_exporter_count_restarts_total"), std::optional(1.0));
  }

  // A quiet database: the last rows counted are an hour old, and retention has removed them since.
  // A restart of PostgreSQL is no failover that lost them: only rows created shortly before the
  // last collection are looked up, as only the last writes can be lost, and counting goes on.
  void aRestartAfterRetentionRemovedOldCountedRowsCountsOn() {
    Pair pair("tst_exporter_failover_quiet");
    auto& db = pair.db;
    RunningExporter& e = *pair.exporter;
    QVERIFY(e.waitForCollections(1));
    {
      auto c = db->connect();
      pqxx::work tx(*c);
      for (int i = 0; i < 5; ++i) {
        tx.exec_params("SELECT idem.begin($1, 'payment', $2, 'pay', NULL, 'initial', '{}')",
                       "old-" + std::to_string(i), "o-old-" + std::to_string(i));
      }
      tx.exec("SET LOCAL session_replication_role = replica");
      tx.exec("UPDATE idem.attempts SET created_at = created_at - interval '1 hour'");
      tx.exec("UPDATE idem.transitions SET created_at = created_at - interval '1 hour'");
      tx.commit();
    }
    QVERIFY(waitUntil([&] { return requests(e) == 5.0; }));
    QVERIFY(e.waitForCollections(2));
    db->exec(
        "SET session_replication_role = replica; DELETE FROM idem.transitions; "
        "DELETE FROM idem.attempts; DELETE FROM idem.records; "
        "SET session_replication_role = origin");
    pair.primary->stop();
    pair.primary->start();
    QVERIFY(
        waitUntil([&] { return gauge(e, "idempotency_exporter_db_up") == std::optional(1.0); }));
    beginCommitted(*db, 0, 3);
    QVERIFY(waitUntil([&] { return requests(e) == 8.0; }));
    QCOMPARE(gauge(e, "idempotency_exporter_count_restarts_total"), std::optional(0.0));
  }

  // The exporter reads replica A; A stops, and the exporter's next connection reaches replica B
  // (as a read-only address in front of both would), which has not replayed the last 10 rows yet.
  // Not a loss: counting waits for B to catch up, then goes on, exact, with no count restart.
  void anExporterMovedToAReplicaBehindWaitsForItToReplay() {
    Replicated nodes("tst_exporter_failover_behind");
    PgCluster& primary = *nodes.primary;
    auto [a, b, db] = std::tie(nodes.a, nodes.b, nodes.db);
    const std::string replicas = "host=" + a->socketDir().toStdString() + "," +
                                 b->socketDir().toStdString() +
                                 " port=" + std::to_string(a->port()) + "," +
                                 std::to_string(b->port()) + " user=postgres dbname=" + db->name();
    RunningExporter e(testOptions(replicas));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(*db, 0, 20);
    a->waitForCatchUp(primary);
    b->waitForCatchUp(primary);
    QVERIFY(waitUntil([&] { return requests(e) == 20.0; }));

    const std::string onB = b->dsn().toStdString();
    pqxx::connection bAdmin(onB);
    pqxx::nontransaction(bAdmin).exec("SELECT pg_catalog.pg_wal_replay_pause()");
    beginCommitted(*db, 20, 30);
    a->waitForCatchUp(primary);
    QVERIFY(waitUntil([&] { return requests(e) == 30.0; }));
    a->stop();
    QVERIFY(e.waitForCollections(4));
    QCOMPARE(gauge(e, "idempotency_exporter_count_restarts_total"), std::optional(0.0));
    QCOMPARE(requests(e), 30.0);

    pqxx::nontransaction(bAdmin).exec("SELECT pg_catalog.pg_wal_replay_resume()");
    beginCommitted(*db, 30, 35);
    b->waitForCatchUp(primary);
    QVERIFY(waitUntil([&] { return requests(e) == 35.0; }));
    QVERIFY(e.waitForCollections(2));  // every collector past the rows
    const Series s = e.scrape();
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db));
    QCOMPARE(value(s, "idempotency_exporter_count_restarts_total"), std::optional(0.0));
    db.reset();
  }

  // The exporter reads replica A; the primary stops, replica B is promoted and A follows it onto
  // the new timeline, without a restart. The exporter keeps reading A, exact, no count restart.
  void anExporterOnAReplicaKeepsCountingThroughAnotherReplicasPromotion() {
    Replicated nodes("tst_exporter_failover_replica");
    PgCluster& primary = *nodes.primary;
    auto [a, b, db] = std::tie(nodes.a, nodes.b, nodes.db);
    RunningExporter e(testOptions(a->dsn(QString::fromStdString(db->name())).toStdString()));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(*db, 0, 20);
    a->waitForCatchUp(primary);
    b->waitForCatchUp(primary);
    QVERIFY(waitUntil([&] { return requests(e) == 20.0; }));

    primary.stop();
    b->promote();
    a->follow(*b);
    serveTestDatabasesFrom(*b);
    beginCommitted(*db, 20, 35);
    a->waitForCatchUp(*b, 60'000);
    QVERIFY(waitUntil([&] { return requests(e) == 35.0; }));
    QVERIFY(waitUntil(
        [&] { return gauge(e, "idempotency_exporter_db_timeline") == std::optional(2.0); },
        kFailoverDeadline));
    QVERIFY(e.waitForCollections(2));  // every collector past the rows
    const Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_exporter_db_standby"), std::optional(1.0));
    compareFamily(s, "idempotency_requests_total", sqlRequests(*db));
    compareFamily(s, "idempotency_transitions_total", sqlTransitions(*db));
    QCOMPARE(value(s, "idempotency_exporter_count_restarts_total"), std::optional(0.0));
    db.reset();
  }
};

QTEST_GUILESS_MAIN(TestExporterFailover)
#include "tst_exporter_failover.moc"

// Through a real PgBouncer in transaction mode: nothing is asked of the pooler
// at connect that it refuses, nothing is left in a server session for the next client, each
// timeout holds for its own transaction, and the exporter, idemctl and the simulator work as
// they do on a direct connection (the exporter's counters equal SQL).
#include <QtTest>
#include <atomic>
#include <memory>
#include <pqxx/pqxx>
#include <sstream>
#include <string>

#include "exporter_harness.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "idemctl.hpp"
#include "pg_bouncer.hpp"
#include "simulator.hpp"
#include "sql_truth.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;
using namespace idem::test;

namespace {

std::string show(pqxx::connection& c, const std::string& setting) {
  pqxx::nontransaction tx(c);
  return tx.exec1("SHOW " + setting)[0].c_str();
}

ConnectionSettings settingsFor(const std::string& dsn, std::chrono::milliseconds timeout) {
  ConnectionSettings s = ConnectionSettings::resolve(dsn);
  s.source = "test";
  s.statementTimeout = timeout;
  return s;
}

}  // namespace

class TestPgBouncer : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;
  std::atomic<bool> stop_{false};

  int idemctl(const std::vector<std::string>& args, std::string* out = nullptr) {
    std::ostringstream o, e;
    const int code = ctl::run(args, {o, e, false}, stop_);
    if (out != nullptr) *out = o.str() + e.str();
    if (code != 0) qWarning("idemctl: %s%s", o.str().c_str(), e.str().c_str());
    return code;
  }

  // A new client of `bouncer` finds the server's defaults in its session, whatever ran before.
  void expectDefaultSessions(const PgBouncer& bouncer) {
    auto direct = db_->connect();
    pqxx::connection pooled(bouncer.through(db_->dsn()));
    for (const char* setting : {"statement_timeout", "default_transaction_read_only", "jit",
                                "max_parallel_workers_per_gather"}) {
      const std::string seen = show(pooled, setting), byDefault = show(*direct, setting);
      QVERIFY2(seen == byDefault,
               (std::string(setting) + " is " + seen +
                " for the next client of the pooler, not the default " + byDefault)
                   .c_str());
    }
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<TestDatabase>("tst_pgbouncer"); }
  void init() { db_->reset(); }

  // The pooler really refuses `options` (no ignore_startup_parameters), and a connection with a
  // statement timeout gets through all the same: the timeout is not asked for at connect.
  void optionsAreRefusedAtConnectAndTimeoutsAreNotSentThere() {
    PgBouncer bouncer(db_->dsn());
    const std::string dsn = bouncer.through(db_->dsn());
    try {
      pqxx::connection refused(dsn + " options='-c statement_timeout=1000'");
      QFAIL("pgbouncer accepted options");
    } catch (const pqxx::broken_connection& e) {
      QVERIFY2(
          std::string(e.what()).find("unsupported startup parameter: options") != std::string::npos,
          e.what());
    }
    auto c = idem::connect(settingsFor(dsn, std::chrono::milliseconds(1000)));
    QCOMPARE(show(*c, "statement_timeout"), std::string("0"));
    QVERIFY(idem::sessionIsShared(*c));
    auto direct = db_->connect();
    QVERIFY(!idem::sessionIsShared(*direct));
  }

  // One server connection for every client: what one transaction sets, the next one would see.
  void aTimeoutHoldsForItsTransactionAndNoLonger() {
    PgBouncer bouncer(db_->dsn(), {"postgres"}, 1);
    pqxx::connection c(bouncer.through(db_->dsn()));
    {
      const StatementTimeoutScope timeout(std::chrono::milliseconds(200));
      {
        Work tx(c);
        QCOMPARE(std::string(tx.exec1("SHOW statement_timeout")[0].c_str()), std::string("200ms"));
        tx.commit();
      }
      QCOMPARE(boundedCall(c,
                           [](pqxx::transaction_base& tx) {
                             return std::string(tx.exec1("SHOW statement_timeout")[0].c_str());
                           }),
               std::string("200ms"));
      try {
        translatingErrors("sleep", [&] {
          ReadTransaction tx(c);
          tx.exec("SELECT pg_sleep(2)");
        });
        QFAIL("the statement timeout did not hold");
      } catch (const DatabaseError& e) {
        QCOMPARE(e.kind(), DatabaseErrorKind::QueryCancelled);
      }
    }
    // Without a scope: the server's default, in a transaction as in a single statement.
    QCOMPARE(boundedCall(c,
                         [](pqxx::transaction_base& tx) {
                           return std::string(tx.exec1("SHOW statement_timeout")[0].c_str());
                         }),
             std::string("0"));
    expectDefaultSessions(bouncer);
  }

  // Before: the exporter could not connect (options), and once it could it set its statement
  // timeout and read-only default for the session, which the next client of that server
  // connection inherited.
  void theExporterLeavesNothingInTheSharedSession() {
    PgBouncer bouncer(db_->dsn(), {"postgres"}, 1);
    auto options = testOptions(bouncer.through(db_->dsn()));
    options.statementTimeout = std::chrono::milliseconds(1234);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(3));
    QCOMPARE(value(e.scrape(), "idempotency_exporter_db_up"), std::optional(1.0));
    expectDefaultSessions(bouncer);
    if (QTest::currentTestFailed()) return;
    // And the next client may write.
    pqxx::connection writer(bouncer.through(db_->dsn()));
    ProtocolClient client(writer);
    QCOMPARE(client.begin(payRequest("k-after-exporter", "o-1")).outcome, Outcome::Executed);
  }

  // Two clients of a pooler with one server connection: each recognises the shared session and
  // sends a claim's statements unnamed, leaving no prepared statement in it for the other to
  // find (the name taken) or lose (DEALLOCATE ALL, DISCARD ALL); each call runs once.
  void claimsThroughThePoolerLeaveNoPreparedStatement() {
    PgBouncer bouncer(db_->dsn(), {"postgres"}, 1);
    pqxx::connection first(bouncer.through(db_->dsn())), second(bouncer.through(db_->dsn()));
    ProtocolClient a(first), b(second);
    const BeginResult a1 = a.begin(payRequest("k-a1", "o-a1"));
    QCOMPARE(a1.outcome, Outcome::Executed);
    const BeginResult b1 = b.begin(payRequest("k-b1", "o-b1"));
    QCOMPARE(b1.outcome, Outcome::Executed);
    {
      pqxx::nontransaction tx(second);
      QCOMPARE(tx.exec1("SELECT count(*) FROM pg_prepared_statements")[0].as<int>(), 0);
      tx.exec("DEALLOCATE ALL");
    }
    const BeginResult a2 = a.begin(payRequest("k-a2", "o-a2"));
    QCOMPARE(a2.outcome, Outcome::Executed);
    QVERIFY(a.complete("k-a1", 1, "{}", *a1.claimToken).ok());
    QVERIFY(a.complete("k-a2", 1, "{}", *a2.claimToken).ok());
    QVERIFY(b.complete("k-b1", 1, "{}", *b1.claimToken).ok());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS'"), 3LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts"), 3LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions"), 6LL);
    pqxx::nontransaction tx(first);
    QCOMPARE(tx.exec1("SELECT count(*) FROM pg_prepared_statements")[0].as<int>(), 0);
  }

  // The exporter's ground truth through the pooler, with traffic through it too.
  void exporterCountersEqualSqlThroughThePooler() {
    PgBouncer bouncer(db_->dsn());
    auto options = testOptions(bouncer.through(db_->dsn()));
    options.ratioWindow = std::chrono::hours(1);
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    sim::SimulationConfig traffic;
    traffic.connection = settingsFor(bouncer.through(db_->dsn()), std::chrono::seconds(10));
    traffic.agents = 4;
    traffic.seed = 10;
    traffic.operations = 800;
    traffic.runId = "pooled";
    traffic.doubleChargeRate = 0.05;
    traffic.lease = std::chrono::milliseconds(60'000);
    const sim::SimulationSummary s = sim::simulate(traffic, stop_);
    QVERIFY(s.doubleCharges > 0);
    QVERIFY(e.waitForCollections(2));
    const Series scraped = e.scrape();
    compareFamily(scraped, "idempotency_requests_total", sqlRequests(*db_));
    compareFamily(scraped, "idempotency_fund_flows_total", sqlFundFlows(*db_));
    compareFamily(scraped, "idempotency_duplicate_fund_flows_total", sqlDuplicates(*db_));
    compareFamily(scraped, "idempotency_transitions_total", sqlTransitions(*db_));
    QCOMPARE(value(scraped, "idempotency_exporter_db_up"), std::optional(1.0));
    expectDefaultSessions(bouncer);
  }

  void idemctlWorksThroughThePooler() {
    const std::string operatorRole = db_->createLoginRole("op", "idem_operator");
    const std::string writerRole = db_->createLoginRole("agent", "idem_writer");
    const std::string reconcilerRole = db_->createLoginRole("recon", "idem_reconciler");
    const std::string ledgerRole = db_->createLoginRole("gateway", "idem_ledger");
    PgBouncer bouncer(db_->dsn(),
                      {"postgres", operatorRole, writerRole, reconcilerRole, ledgerRole});
    const auto as = [&](const std::string& role) { return bouncer.through(db_->dsnAs(role)); };

    std::string out;
    QCOMPARE(idemctl({"migrate", "--db.dsn", bouncer.through(db_->dsn())}, &out), 0);
    // From nothing: every migration in one transaction, under a transaction-scoped lock.
    TestDatabase fresh("tst_pgbouncer_fresh", false);
    QCOMPARE(idemctl({"migrate", "--db.dsn", bouncer.through(fresh.dsn())}, &out), 0);
    QCOMPARE(fresh.scalar("SELECT max(version) FROM idem.schema_migrations"),
             db_->scalar("SELECT max(version) FROM idem.schema_migrations"));
    QCOMPARE(idemctl({"simulate", "--db.dsn", as(writerRole), "--requests", "200", "--seed", "4",
                      "--run-id", "pooled", "--operator-dsn", as(operatorRole), "--reconciler-dsn",
                      as(reconcilerRole), "--ledger-dsn", as(ledgerRole)},
                     &out),
             0);
    QVERIFY2(out.find("operations 200") != std::string::npos, out.c_str());

    // A lost response, settled by the operator through the pooler.
    {
      pqxx::connection agent(as(writerRole));
      ProtocolClient client(agent);
      const BeginResult b = client.begin(payRequest("pay-pooled", "o-pooled"));
      QCOMPARE(b.outcome, Outcome::Executed);
      QVERIFY(client.markUnknown("pay-pooled", *b.version, "timeout", *b.claimToken).ok());
    }
    QCOMPARE(idemctl({"settle", "pay-pooled", "--to", "FAILED", "--reason", "never charged",
                      "--db.dsn", as(operatorRole)},
                     &out),
             0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE idempotency_key = 'pay-pooled' "
                         "AND status = 'FAILED'"),
             1LL);
    QCOMPARE(idemctl({"reconcile", "--db.dsn", as(reconcilerRole)}, &out), 0);
    QCOMPARE(idemctl({"expire-leases", "--db.dsn", bouncer.through(db_->dsn())}, &out), 0);
    expectDefaultSessions(bouncer);
  }
};

QTEST_GUILESS_MAIN(TestPgBouncer)
#include "tst_pgbouncer.moc"

// The roles of the contract (v2) hold exactly their grants: the writer only calls the protocol, the
// reader only reads, the operator reads and settles, the reconciler reads, resolves, reconciles and
// sweeps leases; nobody updates or deletes directly; idem_owner owns everything; nothing is PUBLIC,
// and a function a later migration leaves executable by PUBLIC stops `migrate`.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

class TestRoles : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::string writer_, reader_, operator_, reconciler_, stranger_;

  // The SQLSTATE of running sql as user (empty when it succeeds).
  std::string attempt(const std::string& user, const std::string& sql) {
    pqxx::connection c(db_->dsnAs(user));
    pqxx::nontransaction tx(c);
    try {
      translatingErrors("as role", [&] { tx.exec(sql); });
      return "";
    } catch (const DatabaseError& e) {
      return e.sqlstate();
    }
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_roles");
    writer_ = db_->createLoginRole("agent_runtime", "idem_writer");
    reader_ = db_->createLoginRole("exporter", "idem_reader");
    operator_ = db_->createLoginRole("alice", "idem_operator");
    reconciler_ = db_->createLoginRole("reconciler", "idem_reconciler");
    stranger_ = db_->createLoginRole("stranger", "");
    auto c = db_->connect();
    ProtocolClient p(*c);
    const BeginResult b = p.begin(test::payRequest("k1", "o1"));
    QVERIFY(p.markUnknown("k1", 1, "timeout", *b.claimToken).ok());
    p.recordFundFlow({"payment", "o1", FundFlowKind::Debit, 1, "CNY", "gw-1", "k1"});
  }

  void groupRolesAreNologin() {
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM pg_roles WHERE rolname IN ('idem_writer', 'idem_reader', "
                    "'idem_operator', 'idem_reconciler', 'idem_owner') AND NOT rolcanlogin"),
        5LL);
  }

  void writerCallsTheProtocolButTouchesNoTable() {
    QCOMPARE(
        attempt(writer_,
                "SELECT * FROM idem.begin('w1', 'payment', 'ow', 'pay', NULL, 'initial', '{}')"),
        std::string());
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.complete('w1', 1, '{}', gen_random_uuid())"),
             std::string());
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.fail('w1', 1, 'x', gen_random_uuid(), false)"),
             std::string());
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.mark_unknown('w1', 1, 'x', gen_random_uuid())"),
             std::string());
    QCOMPARE(
        attempt(writer_,
                "SELECT * FROM idem.record_fund_flow('payment', 'ow', 'DEBIT', 1, 'CNY', 'gw-w')"),
        std::string());
    QCOMPARE(attempt(writer_, "SELECT idem.expire_leases()"), std::string());
    const std::string denied = "42501";
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'writer cannot')"),
             denied);
    QCOMPARE(attempt(writer_, "SELECT count(*) FROM idem.records"), denied);
    QCOMPARE(
        attempt(
            writer_,
            "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, "
            "outcome, request_hash) VALUES ('x','p','o','t','initial','executed','h')"),
        denied);
    QCOMPARE(
        attempt(writer_, "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'"),
        denied);
    QCOMPARE(attempt(writer_, "DELETE FROM idem.fund_flows"), denied);
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.purge('1 day')"), denied);
    QCOMPARE(
        attempt(writer_,
                "SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'writer cannot', '{\"e\": 1}')"),
        denied);
    QCOMPARE(attempt(writer_, "SELECT idem.reconcile()"), denied);
    QCOMPARE(attempt(writer_, "SELECT money_moved FROM idem.money_position"), denied);
    QCOMPARE(attempt(writer_, "SELECT idem.act('operator', 'forged', '')"), denied);
  }

  void readerReadsEverythingAndWritesNothing() {
    for (const char* table :
         {"records", "attempts", "transitions", "fund_flows", "retired_keys", "money_position"}) {
      QCOMPARE(attempt(reader_, std::string("SELECT count(*) FROM idem.") + table), std::string());
    }
    QCOMPARE(
        attempt(reader_,
                "SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'reader cannot', '{\"e\": 1}')"),
        std::string("42501"));
    QCOMPARE(attempt(reader_, "SELECT idem.expire_leases()"), std::string("42501"));
    const std::string denied = "42501";
    QCOMPARE(
        attempt(reader_,
                "SELECT * FROM idem.begin('r1', 'payment', 'or', 'pay', NULL, 'initial', '{}')"),
        denied);
    QCOMPARE(attempt(reader_, "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'reader cannot')"),
             denied);
    QCOMPARE(attempt(reader_, "UPDATE idem.records SET last_error = 'x'"), denied);
    QCOMPARE(attempt(reader_, "DELETE FROM idem.attempts"), denied);
    QCOMPARE(attempt(reader_,
                     "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
                     "external_ref) VALUES ('p','o','DEBIT',1,'CNY','x')"),
             denied);
  }

  // The schema's named conditions (sql/010) are the readers' to call, and the writer's not: the
  // exporter, the admin app and the reconciler ask idem.is_stuck and idem.transition_allowed.
  void readersAskTheSchemasConditionsAndTheWriterDoesNot() {
    const std::string stuck =
        "SELECT count(*) FROM idem.records WHERE status IN ('PROCESSING', 'UNKNOWN') AND "
        "idem.is_stuck(status, lease_expires_at) AND NOT idem.lease_expired(status, "
        "lease_expires_at)";
    const std::string machine = "SELECT idem.transition_allowed(NULL, 'PROCESSING', 'system')";
    for (const auto& role : {reader_, operator_, reconciler_}) {
      QCOMPARE(attempt(role, stuck), std::string());
      QCOMPARE(attempt(role, machine), std::string());
    }
    QCOMPARE(attempt(writer_, machine), std::string("42501"));
    QCOMPARE(attempt(stranger_, "SELECT idem.is_stuck('UNKNOWN', now())"), std::string("42501"));
  }

  void operatorReadsAndSettlesButNeverUpdatesDirectly() {
    const std::string denied = "42501";
    QCOMPARE(attempt(operator_, "SELECT count(*) FROM idem.fund_flows"), std::string());
    QCOMPARE(attempt(operator_,
                     "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'"),
             denied);
    QCOMPARE(attempt(operator_, "DELETE FROM idem.records WHERE idempotency_key = 'k1'"), denied);
    QCOMPARE(attempt(operator_, "DELETE FROM idem.transitions"), denied);
    QCOMPARE(attempt(operator_, "SELECT * FROM idem.complete('k1', 2, '{}', gen_random_uuid())"),
             denied);
    QCOMPARE(attempt(operator_,
                     "SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'operator resolves not', "
                     "'{\"e\": 1}')"),
             denied);
    QCOMPARE(attempt(operator_, "SELECT idem.reconcile()"), denied);
    QCOMPARE(attempt(operator_,
                     "SELECT money_moved FROM idem.money_position WHERE biz_type = 'payment' AND "
                     "biz_id = 'o1'"),
             std::string());
    QCOMPARE(attempt(operator_,
                     "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'statement shows the charge')"),
             std::string());
    // The history names the person, not the function's owner.
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const auto r = tx.exec(
        "SELECT actor, actor_kind FROM idem.transitions WHERE idempotency_key = 'k1' ORDER BY id "
        "DESC LIMIT 1");
    QCOMPARE(std::string(r[0][0].c_str()), operator_);
    QCOMPARE(std::string(r[0][1].c_str()), std::string("operator"));
  }

  void reconcilerReadsResolvesAndReconcilesOnly() {
    const std::string denied = "42501";
    {
      auto c = db_->connect();
      ProtocolClient p(*c);
      const BeginResult b = p.begin(test::payRequest("k2", "o2"));
      QVERIFY(p.markUnknown("k2", 1, "timeout", *b.claimToken).ok());
    }
    QCOMPARE(attempt(reconciler_, "SELECT count(*) FROM idem.records"), std::string());
    QCOMPARE(attempt(reconciler_, "SELECT count(*) FROM idem.money_position"), std::string());
    QCOMPARE(attempt(reconciler_, "SELECT idem.reconcile()"), std::string());
    QCOMPARE(attempt(reconciler_, "SELECT idem.expire_leases()"), std::string());
    QCOMPARE(attempt(reconciler_,
                     "SELECT * FROM idem.resolve('k2', 2, 'FAILED', 'gateway: no such payment', "
                     "'{\"lookup\": \"none\"}')"),
             std::string());
    QCOMPARE(attempt(reconciler_,
                     "SELECT * FROM idem.settle('k2', 3, 'SUCCESS', 'reconciler settles not')"),
             denied);
    QCOMPARE(
        attempt(reconciler_,
                "SELECT * FROM idem.begin('x1', 'payment', 'ox', 'pay', NULL, 'initial', '{}')"),
        denied);
    QCOMPARE(attempt(reconciler_, "SELECT * FROM idem.complete('k2', 3, '{}', gen_random_uuid())"),
             denied);
    QCOMPARE(attempt(reconciler_, "SELECT * FROM idem.purge('1 day')"), denied);
    QCOMPARE(attempt(reconciler_,
                     "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k2'"),
             denied);
    QCOMPARE(attempt(reconciler_, "DELETE FROM idem.retired_keys"), denied);
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const auto r = tx.exec(
        "SELECT actor, actor_kind, status FROM idem.transitions JOIN idem.records USING "
        "(idempotency_key) WHERE idempotency_key = 'k2' ORDER BY id DESC LIMIT 1");
    QCOMPARE(std::string(r[0][0].c_str()), reconciler_);
    QCOMPARE(std::string(r[0][1].c_str()), std::string("reconciler"));
    QCOMPARE(std::string(r[0][2].c_str()), std::string("FAILED"));
  }

  // The owner is idem_owner for every object of the schema; SECURITY DEFINER functions run as it.
  void idemOwnerOwnsEverything() {
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'idem' AND nspowner <> "
                         "'idem_owner'::regrole"),
             0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_class WHERE relnamespace = 'idem'::regnamespace "
                         "AND relowner <> 'idem_owner'::regrole"),
             0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_proc WHERE pronamespace = 'idem'::regnamespace "
                         "AND proowner <> 'idem_owner'::regrole"),
             0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_type WHERE typnamespace = 'idem'::regnamespace "
                         "AND typowner <> 'idem_owner'::regrole"),
             0LL);
    QVERIFY(db_->scalar("SELECT count(*) FROM pg_proc WHERE pronamespace = 'idem'::regnamespace "
                        "AND prosecdef") >= 9);
  }

  // EXECUTE is exactly the contract's table; PUBLIC has nothing on any function.
  void functionGrantsAreExactlyTheContractsTable() {
    QCOMPARE(db_->scalar(
                 "SELECT count(*) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', "
                 "p.proowner))) a WHERE p.pronamespace = 'idem'::regnamespace AND a.grantee = 0"),
             0LL);
    pqxx::connection c(db_->dsn());
    pqxx::work tx(c);
    const std::vector<std::string> differences = functionGrantDifferences(tx);
    QVERIFY2(differences.empty(), differences.empty() ? "" : differences.front().c_str());
  }

  // A later migration that adds a function and forgets to take it from PUBLIC is refused by
  // migrate, with the function and the grantee named, and nothing of it is kept.
  void migrateRefusesAFunctionExecutableByPublic() {
    std::vector<Migration> migrations = bundledMigrations();
    migrations.push_back(
        {990, "990_careless.sql",
         "CREATE FUNCTION idem.careless() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
         "ALTER FUNCTION idem.careless() OWNER TO idem_owner;"});
    auto c = db_->connect();
    try {
      migrate(*c, migrations);
      QFAIL("a function executable by PUBLIC was accepted");
    } catch (const MigrationError& e) {
      const std::string message = e.what();
      QVERIFY2(message.find("idem.careless() is executable by PUBLIC") != std::string::npos,
               e.what());
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_proc WHERE proname = 'careless'"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations WHERE version = 990"), 0LL);
    // A grant made by hand since is caught by the next run too.
    db_->exec(
        "GRANT EXECUTE ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) TO "
        "idem_writer");
    try {
      migrate(*c, bundledMigrations());
      QFAIL("an extra grant was accepted");
    } catch (const MigrationError& e) {
      QVERIFY2(std::string(e.what()).find("idem.settle(text, integer, text, text, jsonb, boolean) "
                                          "is executable by idem_writer") != std::string::npos,
               e.what());
    }
    db_->exec(
        "REVOKE EXECUTE ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) FROM "
        "idem_writer");
    QCOMPARE(migrate(*c, bundledMigrations()).applied.size(), std::size_t(0));
    // Created as idem_owner, a function is nobody's but its owner's by default privileges.
    db_->exec(
        "SET ROLE idem_owner; CREATE FUNCTION idem.owned_later() RETURNS int LANGUAGE sql AS "
        "'SELECT 1'; RESET ROLE;");
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', "
                    "p.proowner))) a WHERE p.proname = 'owned_later' AND a.grantee = 0"),
        0LL);
    db_->exec("DROP FUNCTION idem.owned_later()");
  }

  void nobodyElseGetsIn() {
    const std::string denied = "42501";
    QCOMPARE(attempt(stranger_, "SELECT count(*) FROM idem.records"), denied);
    QCOMPARE(
        attempt(stranger_,
                "SELECT * FROM idem.begin('s1', 'payment', 'os', 'pay', NULL, 'initial', '{}')"),
        denied);
    QCOMPARE(attempt(stranger_, "SELECT idem.expire_leases()"), denied);
    QCOMPARE(attempt(stranger_, "SELECT idem.reconcile()"), denied);
    QCOMPARE(attempt(stranger_, "SELECT idem.purge_retired('1 day')"), denied);
    QCOMPARE(attempt(stranger_, "SELECT * FROM idem.money_position"), denied);
  }

  void cleanupTestCase() {
    db_.reset();
    pqxx::connection c(test::TestDatabase::serverDsn());
    pqxx::nontransaction tx(c);
    for (const auto& role : {writer_, reader_, operator_, reconciler_, stranger_})
      tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
  }
};

QTEST_GUILESS_MAIN(TestRoles)
#include "tst_roles.moc"

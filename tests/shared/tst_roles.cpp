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
    return test::sqlstateOf(c, sql);
  }
  // A record's latest change as the history tells it, and the status it left.
  struct Change {
    std::string actor, actorKind, status;
  };
  Change lastChange(const std::string& key) {
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const pqxx::row r = tx.exec_params1(
        "SELECT actor, actor_kind, status FROM idem.transitions JOIN idem.records USING "
        "(idempotency_key) WHERE idempotency_key = $1 ORDER BY id DESC LIMIT 1",
        key);
    return {r[0].c_str(), r[1].c_str(), r[2].c_str()};
  }
  // Each statement as user, in order, runs (no SQLSTATE) or is refused for want of a privilege.
  void expectAllowed(const std::string& user, std::initializer_list<std::string> statements) {
    expect(user, statements, "");
  }
  void expectDenied(const std::string& user, std::initializer_list<std::string> statements) {
    expect(user, statements, "42501");
  }
  void expect(const std::string& user, std::initializer_list<std::string> statements,
              const std::string& sqlstate) {
    for (const std::string& sql : statements) {
      const std::string got = attempt(user, sql);
      QVERIFY2(got == sqlstate,
               (sql + ": got SQLSTATE '" + got + "', want '" + sqlstate + "'").c_str());
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
                    "'idem_operator', 'idem_reconciler', 'idem_owner', 'idem_ledger') AND NOT "
                    "rolcanlogin"),
        6LL);
  }

  void writerCallsTheProtocolButTouchesNoTable() {
    expectAllowed(writer_,
                  {"SELECT * FROM idem.begin('w1', 'payment', 'ow', 'pay', NULL, 'initial', '{}')",
                   "SELECT * FROM idem.complete('w1', 1, '{}', gen_random_uuid())",
                   "SELECT * FROM idem.fail('w1', 1, 'x', gen_random_uuid(), false)",
                   "SELECT * FROM idem.mark_unknown('w1', 1, 'x', gen_random_uuid())",
                   "SELECT idem.expire_leases()"});
    // Its own side effect, with the claim token of its own claim; without one, the ledger is the
    // gateway's.
    {
      pqxx::connection c(db_->dsnAs(writer_));
      ProtocolClient agent(c);
      const BeginResult own = agent.begin(test::payRequest("w2", "ow2"));
      QVERIFY(!agent
                   .recordFundFlow({"payment", "ow2", FundFlowKind::Debit, 1, "CNY", "gw-w2",
                                    std::string("w2")},
                                   *own.claimToken)
                   .alreadyRecorded);
    }
    expectDenied(
        writer_,
        {"SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'writer cannot')",
         "SELECT count(*) FROM idem.records",
         "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, "
         "outcome, request_hash) VALUES ('x','p','o','t','initial','executed','h')",
         "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'",
         "DELETE FROM idem.fund_flows", "SELECT * FROM idem.purge('1 day')",
         "SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'writer cannot', '{\"e\": 1}')",
         "SELECT idem.reconcile()", "SELECT money_moved FROM idem.money_position",
         "SELECT idem.act('operator', 'forged', '')",
         "SELECT * FROM idem.record_fund_flow('payment', 'ow', 'DEBIT', 1, 'CNY', 'gw-w')",
         "SELECT * FROM idem.record_fund_flow('payment', 'o1', 'DEBIT', 1, 'CNY', 'gw-w', 'k1', "
         "gen_random_uuid())",
         "SELECT * FROM idem.business_types"});
  }

  // The gateway's side records what the gateway says, and does nothing else.
  void ledgerRecordsTheGatewaysWordAndNothingElse() {
    const std::string ledger = db_->createLoginRole("webhook", "idem_ledger");
    expectAllowed(
        ledger,
        {"SELECT * FROM idem.record_fund_flow('payment', 'ol', 'DEBIT', 1, 'CNY', 'gw-l', NULL)",
         "SELECT * FROM idem.record_fund_flow('payment', 'o1', 'CAPTURE', 1, 'CNY', 'gw-l2', "
         "'k1')"});
    expectDenied(ledger,
                 {"SELECT * FROM idem.begin('l1', 'payment', 'ol', 'pay', NULL, 'initial', '{}')",
                  "SELECT * FROM idem.complete('k1', 2, '{}', gen_random_uuid())",
                  "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'ledger cannot')",
                  "SELECT idem.reconcile()", "SELECT count(*) FROM idem.fund_flows",
                  "INSERT INTO idem.business_types VALUES ('x', '{}', '{}', 'x')",
                  "SELECT idem.declare_business_type('x', '{}', '{}', 'x')",
                  "UPDATE idem.fund_flows SET amount_minor = 0"});
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE recorded_by = 'ledger' AND "
                         "recorded_login = '" +
                         ledger + "'"),
             2LL);
  }

  void readerReadsEverythingAndWritesNothing() {
    for (const char* table :
         {"records", "attempts", "transitions", "fund_flows", "retired_keys", "money_position"}) {
      expectAllowed(reader_, {std::string("SELECT count(*) FROM idem.") + table});
    }
    expectDenied(reader_,
                 {"SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'reader cannot', '{\"e\": 1}')",
                  "SELECT idem.expire_leases()",
                  "SELECT * FROM idem.begin('r1', 'payment', 'or', 'pay', NULL, 'initial', '{}')",
                  "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'reader cannot')",
                  "UPDATE idem.records SET last_error = 'x'", "DELETE FROM idem.attempts",
                  "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
                  "external_ref) VALUES ('p','o','DEBIT',1,'CNY','x')"});
  }

  // The schema's named conditions (sql/migrations/010) are the readers' to call, and the writer's
  // not: the exporter, the admin app and the reconciler ask idem.is_stuck and
  // idem.transition_allowed.
  void readersAskTheSchemasConditionsAndTheWriterDoesNot() {
    const std::string stuck =
        "SELECT count(*) FROM idem.records WHERE status IN ('PROCESSING', 'UNKNOWN') AND "
        "idem.is_stuck(status, lease_expires_at) AND NOT idem.lease_expired(status, "
        "lease_expires_at)";
    const std::string machine = "SELECT idem.transition_allowed(NULL, 'PROCESSING', 'system')";
    for (const auto& role : {reader_, operator_, reconciler_}) {
      expectAllowed(role, {stuck, machine});
    }
    expectDenied(writer_, {machine});
    expectDenied(stranger_, {"SELECT idem.is_stuck('UNKNOWN', now())"});
  }

  void operatorReadsAndSettlesButNeverUpdatesDirectly() {
    expectAllowed(operator_, {"SELECT count(*) FROM idem.fund_flows"});
    expectDenied(
        operator_,
        {"UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'",
         "DELETE FROM idem.records WHERE idempotency_key = 'k1'", "DELETE FROM idem.transitions",
         "SELECT * FROM idem.complete('k1', 2, '{}', gen_random_uuid())",
         "SELECT * FROM idem.resolve('k1', 2, 'SUCCESS', 'operator resolves not', '{\"e\": 1}')",
         "SELECT idem.reconcile()"});
    expectAllowed(
        operator_,
        {"SELECT money_moved FROM idem.money_position WHERE biz_type = 'payment' AND biz_id = 'o1'",
         "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'statement shows the charge')"});
    // The history names the person, not the function's owner.
    const Change settled = lastChange("k1");
    QCOMPARE(settled.actor, operator_);
    QCOMPARE(settled.actorKind, std::string("operator"));
  }

  void reconcilerReadsResolvesAndReconcilesOnly() {
    {
      auto c = db_->connect();
      ProtocolClient p(*c);
      const BeginResult b = p.begin(test::payRequest("k2", "o2"));
      QVERIFY(p.markUnknown("k2", 1, "timeout", *b.claimToken).ok());
    }
    expectAllowed(reconciler_,
                  {"SELECT count(*) FROM idem.records", "SELECT count(*) FROM idem.money_position",
                   "SELECT idem.reconcile()", "SELECT idem.expire_leases()",
                   "SELECT * FROM idem.resolve('k2', 2, 'FAILED', 'gateway: no such payment', "
                   "'{\"lookup\": \"none\"}')"});
    expectDenied(reconciler_,
                 {"SELECT * FROM idem.settle('k2', 3, 'SUCCESS', 'reconciler settles not')",
                  "SELECT * FROM idem.begin('x1', 'payment', 'ox', 'pay', NULL, 'initial', '{}')",
                  "SELECT * FROM idem.complete('k2', 3, '{}', gen_random_uuid())",
                  "SELECT * FROM idem.purge('1 day')",
                  "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k2'",
                  "DELETE FROM idem.retired_keys"});
    const Change resolved = lastChange("k2");
    QCOMPARE(resolved.actor, reconciler_);
    QCOMPARE(resolved.actorKind, std::string("reconciler"));
    QCOMPARE(resolved.status, std::string("FAILED"));
  }

  // The owner is idem_owner for every object of the schema; SECURITY DEFINER functions run as it.
  void idemOwnerOwnsEverything() {
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'idem' AND nspowner <> "
                         "'idem_owner'::regrole"),
             0LL);
    // Each catalog names its columns with its own prefix: relnamespace, proowner, typowner.
    for (const auto& [catalog, prefix] :
         {std::pair{"pg_class", "rel"}, std::pair{"pg_proc", "pro"}, std::pair{"pg_type", "typ"}}) {
      QCOMPARE(db_->scalar(std::string("SELECT count(*) FROM ") + catalog + " WHERE " + prefix +
                           "namespace = 'idem'::regnamespace AND " + prefix +
                           "owner <> 'idem_owner'::regrole"),
               0LL);
    }
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
    expectDenied(stranger_,
                 {"SELECT count(*) FROM idem.records",
                  "SELECT * FROM idem.begin('s1', 'payment', 'os', 'pay', NULL, 'initial', '{}')",
                  "SELECT idem.expire_leases()", "SELECT idem.reconcile()",
                  "SELECT idem.purge_retired('1 day')", "SELECT * FROM idem.money_position"});
  }

  void cleanupTestCase() { db_.reset(); }
};

QTEST_GUILESS_MAIN(TestRoles)
#include "tst_roles.moc"

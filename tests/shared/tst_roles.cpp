// The three roles of the contract hold exactly their grants: the writer only calls the protocol,
// the reader only reads, the operator reads and settles; nobody updates or deletes directly.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"

using namespace idem;

class TestRoles : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::string writer_, reader_, operator_, stranger_;

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
    stranger_ = db_->createLoginRole("stranger", "");
    auto c = db_->connect();
    ProtocolClient p(*c);
    BeginRequest r;
    r.key = "k1"; r.bizType = "payment"; r.bizId = "o1"; r.tool = "pay";
    p.begin(r);
    QVERIFY(p.markUnknown("k1", 1, "timeout").ok());
    p.recordFundFlow({"payment", "o1", FundFlowKind::Debit, 1, "CNY", "gw-1", "k1"});
  }

  void groupRolesAreNologin() {
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_roles WHERE rolname IN ('idem_writer', 'idem_reader', 'idem_operator') AND NOT rolcanlogin"), 3LL);
  }

  void writerCallsTheProtocolButTouchesNoTable() {
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.begin('w1', 'payment', 'ow', 'pay', NULL, 'initial', '{}')"), std::string());
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.complete('w1', 1, '{}')"), std::string());
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.record_fund_flow('payment', 'ow', 'DEBIT', 1, 'CNY', 'gw-w')"), std::string());
    QCOMPARE(attempt(writer_, "SELECT idem.expire_leases()"), std::string());
    const std::string denied = "42501";
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'writer cannot')"), denied);
    QCOMPARE(attempt(writer_, "SELECT count(*) FROM idem.records"), denied);
    QCOMPARE(attempt(writer_, "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome, request_hash) VALUES ('x','p','o','t','initial','executed','h')"), denied);
    QCOMPARE(attempt(writer_, "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'"), denied);
    QCOMPARE(attempt(writer_, "DELETE FROM idem.fund_flows"), denied);
    QCOMPARE(attempt(writer_, "SELECT * FROM idem.purge('1 day')"), denied);
  }

  void readerReadsEverythingAndWritesNothing() {
    for (const char* table : {"records", "attempts", "transitions", "fund_flows"}) {
      QCOMPARE(attempt(reader_, std::string("SELECT count(*) FROM idem.") + table), std::string());
    }
    const std::string denied = "42501";
    QCOMPARE(attempt(reader_, "SELECT * FROM idem.begin('r1', 'payment', 'or', 'pay', NULL, 'initial', '{}')"), denied);
    QCOMPARE(attempt(reader_, "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'reader cannot')"), denied);
    QCOMPARE(attempt(reader_, "UPDATE idem.records SET last_error = 'x'"), denied);
    QCOMPARE(attempt(reader_, "DELETE FROM idem.attempts"), denied);
    QCOMPARE(attempt(reader_, "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref) VALUES ('p','o','DEBIT',1,'CNY','x')"), denied);
  }

  void operatorReadsAndSettlesButNeverUpdatesDirectly() {
    const std::string denied = "42501";
    QCOMPARE(attempt(operator_, "SELECT count(*) FROM idem.fund_flows"), std::string());
    QCOMPARE(attempt(operator_, "UPDATE idem.records SET status = 'SUCCESS' WHERE idempotency_key = 'k1'"), denied);
    QCOMPARE(attempt(operator_, "DELETE FROM idem.records WHERE idempotency_key = 'k1'"), denied);
    QCOMPARE(attempt(operator_, "DELETE FROM idem.transitions"), denied);
    QCOMPARE(attempt(operator_, "SELECT * FROM idem.complete('k1', 2, '{}')"), denied);
    QCOMPARE(attempt(operator_, "SELECT * FROM idem.settle('k1', 2, 'SUCCESS', 'statement shows the charge')"), std::string());
    // The history names the person, not the function's owner.
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const auto r = tx.exec("SELECT actor, actor_kind FROM idem.transitions WHERE idempotency_key = 'k1' ORDER BY id DESC LIMIT 1");
    QCOMPARE(std::string(r[0][0].c_str()), operator_);
    QCOMPARE(std::string(r[0][1].c_str()), std::string("operator"));
  }

  void nobodyElseGetsIn() {
    const std::string denied = "42501";
    QCOMPARE(attempt(stranger_, "SELECT count(*) FROM idem.records"), denied);
    QCOMPARE(attempt(stranger_, "SELECT * FROM idem.begin('s1', 'payment', 'os', 'pay', NULL, 'initial', '{}')"), denied);
    QCOMPARE(attempt(stranger_, "SELECT idem.expire_leases()"), denied);
  }

  void cleanupTestCase() {
    db_.reset();
    pqxx::connection c(test::TestDatabase::serverDsn());
    pqxx::nontransaction tx(c);
    for (const auto& role : {writer_, reader_, operator_, stranger_}) tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
  }
};

QTEST_GUILESS_MAIN(TestRoles)
#include "tst_roles.moc"

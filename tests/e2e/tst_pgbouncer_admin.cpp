// The admin app's models through a real PgBouncer in transaction mode: the
// DatabaseSession connects, reads a page and the evidence, and settles a record; its 30 s
// statement timeout holds in its own transactions and never reaches another client.
#include <QtTest>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "admin_fixture.hpp"
#include "idem/bounded_transaction.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "pg_bouncer.hpp"

using namespace idem;
using namespace idem::admin;

class TestPgBouncerAdmin : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;

  // Runs work on the session's worker and waits for its reply.
  template <typename Work>
  auto ask(DatabaseSession& session, const char* what, Work work) {
    QObject requester;
    RequestTracker tracker(&requester);
    std::optional<std::invoke_result_t<Work, pqxx::connection&>> reply;
    std::optional<RequestError> error;
    session.submit(
        tracker, what, std::move(work), [&](auto r) { reply = std::move(r); },
        [&](const RequestError& e) { error = e; });
    if (!QTest::qWaitFor([&] { return reply || error; }, 15000))
      throw std::runtime_error("no reply");
    if (error) throw std::runtime_error(error->what());
    return *reply;
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_pgbouncer_admin"); }

  void theAdminAppConnectsReadsAndSettlesThroughThePooler() {
    const std::string operatorRole = db_->createLoginRole("op", "idem_operator");
    test::PgBouncer bouncer(db_->dsn(), {"postgres", operatorRole});
    std::string key;
    {
      auto owner = db_->connect();
      ProtocolClient client(*owner);
      const Claim c = test::claim(client, test::paymentRequest("pay-pooled", "ord-pooled"));
      QVERIFY(client.markUnknown(c.key, c.version, "gateway timeout", c.token).ok());
      key = c.key;
    }

    DatabaseSession session;
    session.open(DatabaseSession::withAdminDefaults(
        test::settingsFor(bouncer.through(db_->dsnAs(operatorRole)))));
    QTRY_VERIFY_WITH_TIMEOUT(session.isConnected(), 15000);

    // The worker's transactions carry the app's timeout; the session does not.
    QCOMPARE(ask(session, "show",
                 [](pqxx::connection& c) {
                   ReadTransaction tx(c);
                   return std::string(tx.exec1("SHOW statement_timeout")[0].c_str());
                 }),
             std::string("30s"));
    const RecordPage page = ask(session, "page", [](pqxx::connection& c) {
      return readPage(c, RecordFilter{}, std::nullopt, 10);
    });
    QCOMPARE(page.records.size(), std::size_t(1));
    const RecordEvidence evidence =
        ask(session, "evidence", [key](pqxx::connection& c) { return readEvidence(c, key); });
    QVERIFY(evidence.record.has_value());

    SettleRequest request;
    request.key = key;
    request.expectedVersion = evidence.record->version;
    request.to = RecordStatus::Failed;
    request.reason = "the gateway never charged";
    const SettleOutcome outcome =
        ask(session, "settle", [request](pqxx::connection& c) { return settle(c, request); });
    QVERIFY2(outcome.verdict == SettleVerdict(ResultCode::Ok), outcome.message.c_str());
    QCOMPARE(test::textBySql(
                 *db_, "SELECT status FROM idem.records WHERE idempotency_key = '" + key + "'"),
             std::string("FAILED"));

    pqxx::connection other(bouncer.through(db_->dsn()));
    pqxx::nontransaction tx(other);
    QCOMPARE(std::string(tx.exec1("SHOW statement_timeout")[0].c_str()), std::string("0"));
  }
};

QTEST_MAIN(TestPgBouncerAdmin)
#include "tst_pgbouncer_admin.moc"

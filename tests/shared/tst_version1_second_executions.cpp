// Each of the seven ways version 1 of the schema let a payment run twice (or left it without
// history), replayed as it was first reproduced, with the roles a real deployment uses. On version
// 1 every one of these ends in a second execution or a silent loss; on version 2 each is refused by
// the database itself.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "login_session.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

// The payment first reproduced: 29.90 CNY.
constexpr const char* kPayment = R"({"amount_minor": 2990, "currency": "CNY"})";

BeginRequest request(const std::string& key, const std::string& bizId,
                     TriggerSource source = TriggerSource::Initial,
                     const std::string& payload = kPayment) {
  return test::payRequestFrom(key, bizId, source, payload);
}

using As = test::LoginSession;

}  // namespace

class TestVersion1SecondExecutions : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::string writer_, writer2_, operator_;

  long long count(const std::string& sql) { return db_->scalar(sql); }
  long long executions(const std::string& key) {
    return count("SELECT count(*) FROM idem.attempts WHERE idempotency_key = '" + key +
                 "' AND outcome = 'executed'");
  }
  // A claim whose lease ends at once.
  BeginResult claimExpired(ProtocolClient& c, const std::string& key, const std::string& bizId) {
    auto r = request(key, bizId);
    r.lease = std::chrono::milliseconds(1);
    BeginResult b = c.begin(r);
    QTest::qWait(5);
    return b;
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_version1_second_executions");
    writer_ = db_->createLoginRole("agent_a", "idem_writer");
    writer2_ = db_->createLoginRole("agent_b", "idem_writer");
    operator_ = db_->createLoginRole("olga", "idem_operator");
  }
  void cleanupTestCase() { db_.reset(); }

  // Version 1: after expire_leases, fail('pay-7', 2, NULL) returned ok and the next begin executed
  // although a DEBIT for the order was recorded.
  void writerCannotFailAnUnknownRecord() {
    As agent(*db_, writer_);
    const BeginResult b = claimExpired(agent.client, "pay-7", "order-7");
    QCOMPARE(agent.client.expireLeases(), 1);
    agent.client.recordFundFlow(
        {"payment", "order-7", FundFlowKind::Debit, 2990, "CNY", "gw-7", "pay-7"}, *b.claimToken);
    // Even the claimant, with its token, may not declare the uncertain outcome failed.
    const ChangeResult f = agent.client.fail("pay-7", 2, "", *b.claimToken, true);
    QCOMPARE(f.result, ResultCode::InvalidTransition);
    QCOMPARE(f.status, std::optional(RecordStatus::Unknown));
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.fail('pay-7', 2, NULL, gen_random_uuid())"),
             std::string());
    QCOMPARE(agent.firstField("SELECT result FROM idem.fail('pay-7', 2, NULL, gen_random_uuid())"),
             std::string("not_claimant"));
    QCOMPARE(agent.client.begin(request("pay-7", "order-7", TriggerSource::Framework)).outcome,
             Outcome::InProgress);
    QCOMPARE(executions("pay-7"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key = 'pay-7' AND status = "
                   "'UNKNOWN' AND version = 2"),
             1LL);
  }

  // Version 1: an operator settled FAILED a PROCESSING record whose lease was live; the agent's
  // complete got conflict, it retried, the FAILED record was re-claimed: a second charge.
  void operatorCannotFailAProcessingRecordWhoseLeaseIsLive() {
    As agent(*db_, writer_);
    As olga(*db_, operator_);
    auto r = request("pay-2", "order-2");
    r.lease = std::chrono::minutes(5);
    const BeginResult b = agent.client.begin(r);
    const ChangeResult s =
        olga.client.settle("pay-2", 1, RecordStatus::Failed, "looks stuck", std::nullopt);
    QCOMPARE(s.result, ResultCode::LeaseActive);
    QCOMPARE(olga.firstField(
                 "SELECT result FROM idem.settle('pay-2', 1, 'FAILED', 'psql skips no guard')"),
             std::string("lease_active"));
    QVERIFY(agent.client.complete("pay-2", 1, R"({"gateway_ref": "gw-2"})", *b.claimToken).ok());
    QCOMPARE(agent.client.begin(request("pay-2", "order-2", TriggerSource::Framework)).outcome,
             Outcome::Replayed);
    QCOMPARE(executions("pay-2"), 1LL);
  }

  // Version 1: the money-moved guard lived only in the C++ client and counted only DEBIT: a FREEZE
  // + CAPTURE went through `idemctl settle --to FAILED`, and psql skipped the guard entirely.
  void moneyMovedIsRefusedInSqlAndCountsCapture() {
    As agent(*db_, writer_);
    As olga(*db_, operator_);
    const std::string token = *claimExpired(agent.client, "pay-3", "order-3").claimToken;
    QCOMPARE(agent.client.expireLeases(), 1);
    agent.client.recordFundFlow(
        {"payment", "order-3", FundFlowKind::Freeze, 2990, "CNY", "gw-3-hold", "pay-3"}, token);
    agent.client.recordFundFlow(
        {"payment", "order-3", FundFlowKind::Capture, 2990, "CNY", "gw-3-cap", "pay-3"}, token);
    // Plain SQL, as psql sends it, as the operator role.
    QCOMPARE(olga.firstField(
                 "SELECT result FROM idem.settle('pay-3', 2, 'FAILED', 'gateway shows nothing')"),
             std::string("side_effect_recorded"));
    QCOMPARE(olga.firstField("SELECT money_moved::text FROM idem.money_position WHERE biz_type = "
                             "'payment' AND biz_id = 'order-3'"),
             std::string("true"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key = 'pay-3' AND status = "
                   "'UNKNOWN'"),
             1LL);
    QCOMPARE(agent.client.begin(request("pay-3", "order-3", TriggerSource::Llm)).outcome,
             Outcome::InProgress);
    QCOMPARE(executions("pay-3"), 1LL);
  }

  // Version 1: payload_mismatch and conflict answers handed the current version to any writer,
  // which then completed someone else's claim with its own response; the real claimant got conflict
  // and its retry was replayed the stranger's response.
  void strangerWhoKnowsTheVersionCannotCompleteSomeoneElsesClaim() {
    As agent(*db_, writer_);
    As stranger(*db_, writer2_);
    const BeginResult b = agent.client.begin(request("pay-4", "order-4"));
    const BeginResult probe = stranger.client.begin(
        request("pay-4", "order-4", TriggerSource::Llm, R"({"other": true})"));
    QCOMPARE(probe.outcome, Outcome::PayloadMismatch);
    QCOMPARE(probe.version, std::optional(1));  // the version is no secret any more...
    QVERIFY(!probe.claimToken);                 // ...the token is
    // The stranger's own token, from a claim of its own, is no good either.
    const BeginResult own = stranger.client.begin(request("pay-4-own", "order-4-own"));
    for (const std::string& token :
         {std::string("00000000-0000-4000-8000-000000000000"), *own.claimToken, std::string()}) {
      const ChangeResult r =
          stranger.client.complete("pay-4", *probe.version, R"({"stranger": true})", token);
      QCOMPARE(r.result, ResultCode::NotClaimant);
      QVERIFY(!r.version);
    }
    QCOMPARE(stranger.client.markUnknown("pay-4", 1, "stranger", *own.claimToken).result,
             ResultCode::NotClaimant);
    QCOMPARE(stranger.client.fail("pay-4", 1, "stranger", *own.claimToken, true).result,
             ResultCode::NotClaimant);
    QVERIFY(agent.client.complete("pay-4", 1, R"({"gateway_ref": "gw-4"})", *b.claimToken).ok());
    const BeginResult replay = agent.client.begin(request("pay-4", "order-4", TriggerSource::Http));
    QCOMPARE(replay.outcome, Outcome::Replayed);
    QCOMPARE(replay.responsePayload, std::optional<std::string>(R"({"gateway_ref": "gw-4"})"));
  }

  // Version 1: purge deleted the attempts and transitions of records still PROCESSING, and after a
  // SUCCESS record was purged a late retry under its key, or a new key for the paid order,
  // executed.
  void purgeKeepsUnsettledHistoryAndRetiredKeysNeverRunAgain() {
    As agent(*db_, writer_);
    const BeginResult paid = agent.client.begin(request("pay-5", "order-5"));
    QVERIFY(agent.client.complete("pay-5", 1, "{}", *paid.claimToken).ok());
    agent.client.begin(request("pay-5-stuck", "order-5-stuck"));
    const BeginResult unk = agent.client.begin(request("pay-5-unknown", "order-5-unknown"));
    QVERIFY(agent.client.markUnknown("pay-5-unknown", 1, "timeout", *unk.claimToken).ok());
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - interval '90 days' WHERE idempotency_key "
        "LIKE 'pay-5%'; "
        "ALTER TABLE idem.records ENABLE TRIGGER records_guard; "
        "ALTER TABLE idem.attempts DISABLE TRIGGER attempts_append_only; "
        "UPDATE idem.attempts SET created_at = now() - interval '90 days' WHERE idempotency_key "
        "LIKE 'pay-5%'; "
        "ALTER TABLE idem.attempts ENABLE TRIGGER attempts_append_only; "
        "ALTER TABLE idem.transitions DISABLE TRIGGER transitions_append_only; "
        "UPDATE idem.transitions SET created_at = now() - interval '90 days' WHERE idempotency_key "
        "LIKE 'pay-5%'; "
        "ALTER TABLE idem.transitions ENABLE TRIGGER transitions_append_only;");
    const long long unsettledHistory = count(
        "SELECT (SELECT count(*) FROM idem.attempts WHERE idempotency_key IN ('pay-5-stuck', "
        "'pay-5-unknown')) + (SELECT count(*) FROM idem.transitions WHERE idempotency_key IN "
        "('pay-5-stuck', 'pay-5-unknown'))");
    QCOMPARE(unsettledHistory, 5LL);
    QCOMPARE(count("SELECT tombstones_written FROM idem.purge(interval '30 days')"), 1LL);
    QCOMPARE(count("SELECT (SELECT count(*) FROM idem.attempts WHERE idempotency_key IN "
                   "('pay-5-stuck', 'pay-5-unknown')) + (SELECT count(*) FROM idem.transitions "
                   "WHERE idempotency_key IN ('pay-5-stuck', 'pay-5-unknown'))"),
             unsettledHistory);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key IN ('pay-5-stuck', "
                   "'pay-5-unknown')"),
             2LL);
    QCOMPARE(agent.client.begin(request("pay-5", "order-5", TriggerSource::Callback)).outcome,
             Outcome::Retired);
    QCOMPARE(agent.client.begin(request("pay-5-again", "order-5", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key IN ('pay-5', "
                   "'pay-5-again') AND outcome = 'executed'"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id = 'order-5'"), 0LL);
  }

  // Version 1: a definite business failure (insufficient balance) had no place in the protocol:
  // every FAILED record was re-claimable.
  void definiteBusinessFailureIsHandedBackNeverRetried() {
    As agent(*db_, writer_);
    const BeginResult b = agent.client.begin(request("pay-6", "order-6"));
    QVERIFY(agent.client.fail("pay-6", 1, "insufficient balance", *b.claimToken).ok());
    for (TriggerSource source : {TriggerSource::Llm, TriggerSource::Framework, TriggerSource::Http,
                                 TriggerSource::Callback}) {
      const BeginResult r = agent.client.begin(request("pay-6", "order-6", source));
      QCOMPARE(r.outcome, Outcome::Replayed);
      QCOMPARE(r.status, std::optional(RecordStatus::Failed));
      QCOMPARE(r.responsePayload,
               std::optional<std::string>(R"({"error": "insufficient balance"})"));
    }
    QCOMPARE(executions("pay-6"), 1LL);
  }

  // Version 1: a reason of tabs and newlines passed; evidence had no bound (and was replayed to the
  // agent as its response); a 1000-year lease hid a record; biz_type had no bound; the functions
  // belonged to whoever migrated and a later function was executable by PUBLIC.
  void smallHolesAreClosed() {
    As agent(*db_, writer_);
    As olga(*db_, operator_);
    claimExpired(agent.client, "pay-77", "order-77");
    QCOMPARE(olga.sqlstateOf("SELECT * FROM idem.settle('pay-77', 1, 'SUCCESS', E'\\t\\n \\r')"),
             std::string("22023"));
    QCOMPARE(
        olga.sqlstateOf(
            "SELECT * FROM idem.settle('pay-77', 1, 'SUCCESS', E'\\u00a0\\u2003\\u200b\\u3000')"),
        std::string("22023"));
    QCOMPARE(olga.sqlstateOf("SELECT * FROM idem.settle('pay-77', 1, 'SUCCESS', 'big', "
                             "jsonb_build_object('blob', repeat('x', 65536)))"),
             std::string("22023"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key = 'pay-77' AND status "
                   "= 'PROCESSING' AND version = 1"),
             1LL);
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.begin('pay-78', 'payment', 'order-78', 'pay', "
                              "NULL, 'initial', '{}', interval '1000 years')"),
             std::string("22023"));
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.begin('pay-79', repeat('p', 65), 'order-79', "
                              "'pay', NULL, 'initial', '{}')"),
             std::string("22023"));
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.begin('pay-79', 'pay ment', 'order-79', 'pay', "
                              "NULL, 'initial', '{}')"),
             std::string("22023"));
    QCOMPARE(
        count("SELECT count(*) FROM idem.records WHERE idempotency_key IN ('pay-78', 'pay-79')"),
        0LL);
    QCOMPARE(count("SELECT count(*) FROM pg_proc WHERE pronamespace = 'idem'::regnamespace AND "
                   "prosecdef AND proowner <> 'idem_owner'::regrole"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', "
                   "p.proowner))) a WHERE p.pronamespace = 'idem'::regnamespace AND a.grantee = 0"),
             0LL);
  }
};

QTEST_GUILESS_MAIN(TestVersion1SecondExecutions)
#include "tst_version1_second_executions.moc"

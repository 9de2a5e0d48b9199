// The protocol functions (schema contract v2), one behaviour at a time, against a real PostgreSQL:
// every begin outcome with its attempt row and claim token, the claimant's answers, every row of
// the state machine and every refused transition (through the functions and through direct
// UPDATEs), fund flows, retention, and bad input that changes nothing. Each role's rights:
// tst_roles; the state machine per role: tst_state_machine; the bounds: tst_bounds; the seven
// ways version 1 let a payment run twice: tst_version1_second_executions.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

BeginRequest request(const std::string& key, const std::string& bizId,
                     TriggerSource source = TriggerSource::Initial,
                     const std::string& payload = R"({"amount": 2990, "currency": "CNY"})") {
  BeginRequest r = test::payRequestFrom(key, bizId, source, payload);
  r.agentId = "agent-1";
  r.traceId = "trace-" + key;
  return r;
}

}  // namespace

class TestProtocol : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<ProtocolClient> client_;

  long long count(const std::string& sql) { return db_->scalar(sql); }
  std::string text(const std::string& sql) {
    pqxx::nontransaction tx(*conn_);
    const auto r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string("<null>") : std::string(r[0][0].c_str());
  }
  // Snapshot of a record as text, to show that a refused call changed nothing.
  std::string recordRow(const std::string& key) {
    return text("SELECT r::text FROM idem.records r WHERE idempotency_key = '" + key + "'");
  }
  // begin that must execute: the claimant's token.
  std::string claim(const BeginRequest& r) {
    const BeginResult b = client_->begin(r);
    if (b.outcome != Outcome::Executed || !b.claimToken) {
      throw std::runtime_error("begin " + r.key +
                               " did not execute: " + std::string(format(b.outcome)));
    }
    return *b.claimToken;
  }
  // A record settled at version 2 takes no answer: the claimant's three, settle FAILED and resolve
  // to `resolveTo` are each invalid_transition.
  void expectEveryAnswerRefused(const std::string& key, const std::string& token,
                                RecordStatus resolveTo) {
    QCOMPARE(client_->complete(key, 2, "{}", token).result, ResultCode::InvalidTransition);
    QCOMPARE(client_->fail(key, 2, "x", token).result, ResultCode::InvalidTransition);
    QCOMPARE(client_->markUnknown(key, 2, "x", token).result, ResultCode::InvalidTransition);
    QCOMPARE(client_->settle(key, 2, RecordStatus::Failed, "reason", std::nullopt).result,
             ResultCode::InvalidTransition);
    QCOMPARE(client_->resolve(key, 2, resolveTo, "reason", R"({"e": 1})").result,
             ResultCode::InvalidTransition);
  }
  // A PROCESSING record whose lease has ended (the operator and the reconciler may decide it).
  std::string claimExpired(const std::string& key, const std::string& bizId) {
    auto r = request(key, bizId);
    r.lease = std::chrono::milliseconds(1);
    const std::string token = claim(r);
    QTest::qWait(5);
    return token;
  }
  int sqlstateOf(const std::function<void()>& fn, std::string* message = nullptr) {
    try {
      fn();
    } catch (const DatabaseError& e) {
      if (message) *message = e.what();
      return std::stoi(e.sqlstate().substr(0, 2)) * 1000;  // class only, e.g. 22000, 23000
    }
    return 0;
  }

  // The day partitions of the history for the day `days` back (UTC), as prepare_history_partitions
  // makes them for the days ahead, and that day's name suffix (YYYYMMDD).
  std::string makeHistoryDay(int days) {
    const std::string day = text("SELECT to_char((now() AT TIME ZONE 'UTC')::date - " +
                                 std::to_string(days) + ", 'YYYYMMDD')");
    db_->makeHistoryDays(days, days);
    return day;
  }
  // Moves the records of the keys (a SQL list) and their history to `days` back: their creation,
  // when the history starts, and every row of it.
  void ageHistory(const std::string& keys, int days) {
    const std::string back = "now() - interval '" + std::to_string(days) + " days'";
    for (const std::string table : {"records", "attempts", "transitions"}) {
      const std::string trigger = table == "records" ? "records_guard" : table + "_append_only";
      db_->exec("ALTER TABLE idem." + table + " DISABLE TRIGGER " + trigger + "; UPDATE idem." +
                table + " SET created_at = " + back + " WHERE idempotency_key IN (" + keys +
                "); ALTER TABLE idem." + table + " ENABLE TRIGGER " + trigger);
    }
  }
  std::string historyIds(const std::string& table, const std::string& keys) {
    return text("SELECT string_agg(id::text, ' ' ORDER BY id) FROM idem." + table +
                " WHERE idempotency_key IN (" + keys + ")");
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_protocol"); }
  void init() {
    db_->reset();
    conn_ = db_->connect();
    client_ = std::make_unique<ProtocolClient>(*conn_);
  }
  void cleanup() {
    client_.reset();
    conn_.reset();
  }

  void beginNewKeyExecutesAndRecordsAttempt() {
    const BeginResult r = client_->begin(request("k1", "o1"));
    QCOMPARE(r.outcome, Outcome::Executed);
    QCOMPARE(r.status, std::optional(RecordStatus::Processing));
    QCOMPARE(r.version, std::optional(1));
    QVERIFY(r.claimToken.has_value());
    QCOMPARE(
        count(
            "SELECT count(*) FROM idem.attempts WHERE idempotency_key='k1' AND outcome='executed' "
            "AND trigger_source='initial' AND agent_id='agent-1' AND trace_id='trace-k1'"),
        1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k1' AND "
                   "from_status IS NULL AND to_status='PROCESSING' AND version=1 AND "
                   "actor_kind='system' AND actor=session_user"),
             1LL);
    QCOMPARE(text("SELECT request_hash FROM idem.records WHERE idempotency_key='k1'"),
             text("SELECT encode(sha256(convert_to('{\"amount\": 2990, \"currency\": "
                  "\"CNY\"}'::jsonb::text, 'UTF8')), 'hex')"));
    QVERIFY(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k1' AND "
                  "lease_expires_at > now() + interval '25 seconds'") == 1);
  }

  // A claim's round trip goes as statements prepared once a session, used call after call; a
  // client asked for unnamed statements leaves nothing in its session.
  void aClaimsStatementsArePreparedOnceASession() {
    for (const char* key : {"k1", "k2"}) {
      const std::string token = claim(request(key, std::string("o-") + key));
      QVERIFY(client_->complete(key, 1, R"({"ok": true})", token).ok());
    }
    const std::string begin = preparedName(claimStatements()[0]);
    const std::string complete = preparedName(claimStatements()[1]);
    QCOMPARE(text("SELECT string_agg(name || ' ' || (generic_plans + custom_plans), ',' "
                  "ORDER BY name) FROM pg_prepared_statements"),
             begin + " 2," + complete + " 2");

    auto other = db_->connect();
    ProtocolClient unnamed(*other, ProtocolClient::Statements::Unnamed);
    const BeginResult b = unnamed.begin(request("k3", "o3"));
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(unnamed.complete("k3", 1, R"({"ok": true})", *b.claimToken).ok());
    pqxx::nontransaction tx(*other);
    QCOMPARE(tx.exec1("SELECT count(*) FROM pg_prepared_statements")[0].as<int>(), 0);
  }

  // A session that lost its prepared statements (a pooler's DISCARD ALL, or its next call sent to
  // another server connection): the call that finds out runs once, unnamed, and so does every
  // call after it.
  void aLostPreparedStatementIsSentUnnamedAndRunsOnce() {
    claim(request("k1", "o1"));
    {
      pqxx::nontransaction tx(*conn_);
      tx.exec("DEALLOCATE ALL");
    }
    const BeginResult b = client_->begin(request("k2", "o2"));
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(client_->complete("k2", 1, R"({"ok": true})", *b.claimToken).ok());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key = 'k2' "
                   "AND status = 'SUCCESS'"),
             1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key = 'k2'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'k2'"), 2LL);
    QCOMPARE(text("SELECT count(*) FROM pg_prepared_statements"), std::string("0"));
  }

  // The name a claim's statement is prepared under, held in the session by another statement (a
  // pooler's server connection another client used): that statement is never run; the call goes
  // unnamed.
  void aNameHeldByAnotherStatementIsNeverRun() {
    const std::string begin = preparedName(claimStatements()[0]);
    {
      pqxx::nontransaction tx(*conn_);
      tx.exec("PREPARE \"" + begin +
              "\" AS SELECT 'replayed'::text, 'SUCCESS'::text, 1, NULL::jsonb, NULL::text");
    }
    const BeginResult b = client_->begin(request("k1", "o1"));
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(b.claimToken.has_value());
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key = 'k1'"), 1LL);
    QCOMPARE(text("SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE name = '" +
                  begin + "'"),
             std::string("0"));
  }

  // Only the SHA-256 of the token is stored: nothing in the database is the token itself.
  void claimTokenIsStoredOnlyAsItsHash() {
    const std::string token = claim(request("k1", "o1"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k1' AND "
                   "claim_token_hash = sha256(uuid_send('" +
                   token + "'::uuid))"),
             1LL);
    QCOMPARE(
        count("SELECT count(*) FROM idem.records r WHERE position('" + token +
              "' IN r::text) > 0 OR position(replace('" + token + "', '-', '') IN r::text) > 0"),
        0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions t WHERE position('" + token +
                   "' IN t::text) > 0"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts a WHERE position('" + token +
                   "' IN a::text) > 0"),
             0LL);
  }

  void onlyTheExecutedOutcomeCarriesAToken() {
    claim(request("k1", "o1"));
    QVERIFY(!client_->begin(request("k1", "o1", TriggerSource::Http)).claimToken);  // in_progress
    QVERIFY(!client_->begin(request("k1", "o1", TriggerSource::Llm, R"({"x": 1})"))
                 .claimToken);                                 // payload_mismatch
    QVERIFY(!client_->begin(request("k2", "o1")).claimToken);  // rejected
  }

  void beginSameKeyWhileProcessingIsInProgress() {
    claim(request("k1", "o1"));
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Http));
    QCOMPARE(r.outcome, Outcome::InProgress);
    QCOMPARE(r.status, std::optional(RecordStatus::Processing));
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='k1' AND "
                   "outcome='in_progress' AND trigger_source='http'"),
             1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions"), 1LL);
  }

  void beginAfterSuccessReplaysStoredResponse() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, R"({"charged": true, "ref": "gw-1"})", token).ok());
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Llm));
    QCOMPARE(r.outcome, Outcome::Replayed);
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    QCOMPARE(r.version, std::optional(2));
    QVERIFY(r.responsePayload.has_value());
    QCOMPARE(QString::fromStdString(*r.responsePayload),
             QStringLiteral(R"({"ref": "gw-1", "charged": true})"));
  }

  void beginOnUnknownIsInProgressNeverReexecuted() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "response timeout after 5s", token).ok());
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome,
             Outcome::InProgress);
  }

  void expiredLeaseIsStillInProgress() {
    claimExpired("k1", "o1");
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome,
             Outcome::InProgress);
    QCOMPARE(client_->expireLeases(), 1);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"),
             std::string("UNKNOWN"));
    QCOMPARE(text("SELECT reason FROM idem.transitions WHERE to_status='UNKNOWN'"),
             std::string("lease expired"));
    QCOMPARE(client_->expireLeases(), 0);
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome,
             Outcome::InProgress);
  }

  // The claimant's answer after the lease expired still counts: it is the claimant.
  void lateCompleteOfUnknownByTheClaimantSucceeds() {
    const std::string token = claimExpired("k1", "o1");
    QCOMPARE(client_->expireLeases(), 1);
    const ChangeResult r = client_->complete("k1", 2, R"({"late": true})", token);
    QVERIFY(r.ok());
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    QCOMPARE(r.version, std::optional(3));
  }

  void retryableFailureIsReclaimedBySameHashOnly() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "connection refused before sending", token, true).ok());
    QCOMPARE(
        count("SELECT count(*) FROM idem.records WHERE idempotency_key='k1' AND retry_allowed"),
        1LL);
    // A different payload under the same key is a mismatch even when FAILED.
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Llm, R"({"amount": 1})")).outcome,
             Outcome::PayloadMismatch);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"),
             std::string("FAILED"));
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Framework));
    QCOMPARE(r.outcome, Outcome::Executed);
    QCOMPARE(r.version, std::optional(3));
    QVERIFY(r.claimToken && *r.claimToken != token);
    QCOMPARE(count("SELECT attempt_count FROM idem.records WHERE idempotency_key='k1'"), 2LL);
    QCOMPARE(
        count("SELECT count(*) FROM idem.records WHERE idempotency_key='k1' AND NOT retry_allowed"),
        1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k1' AND "
                   "from_status='FAILED' AND to_status='PROCESSING' AND version=3"),
             1LL);
    QCOMPARE(text("SELECT actor_kind || ': ' || reason FROM idem.transitions WHERE "
                  "idempotency_key='k1' AND from_status='FAILED'"),
             std::string("system: retried after FAILED (framework)"));
    // The first claim's token is no longer the claimant's: the re-claim has its own.
    QCOMPARE(client_->complete("k1", 3, "{}", token).result, ResultCode::NotClaimant);
    QVERIFY(client_->complete("k1", 3, "{}", *r.claimToken).ok());
  }

  // A definite business failure is handed back, never run again.
  void finalFailureIsReplayedWithItsError() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "insufficient balance", token)
                .ok());  // retry_allowed defaults to false
    const std::string before = recordRow("k1");
    for (TriggerSource source : {TriggerSource::Llm, TriggerSource::Framework, TriggerSource::Http,
                                 TriggerSource::Callback}) {
      const BeginResult r = client_->begin(request("k1", "o1", source));
      QCOMPARE(r.outcome, Outcome::Replayed);
      QCOMPARE(r.status, std::optional(RecordStatus::Failed));
      QCOMPARE(r.version, std::optional(2));
      QVERIFY(!r.claimToken);
      QCOMPARE(r.responsePayload,
               std::optional<std::string>(R"({"error": "insufficient balance"})"));
    }
    QCOMPARE(recordRow("k1"), before);
    QCOMPARE(
        count(
            "SELECT count(*) FROM idem.attempts WHERE idempotency_key='k1' AND outcome='replayed'"),
        4LL);
  }

  void payloadMismatchLeavesRecordUntouched() {
    claim(request("k1", "o1"));
    const std::string before = recordRow("k1");
    const BeginResult r =
        client_->begin(request("k1", "o1", TriggerSource::Llm, R"({"amount": 3990})"));
    QCOMPARE(r.outcome, Outcome::PayloadMismatch);
    QCOMPARE(recordRow("k1"), before);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE outcome='payload_mismatch' AND "
                   "trigger_source='llm'"),
             1LL);
    // The same key for another business object is a mismatch too.
    QCOMPARE(client_->begin(request("k1", "o2")).outcome, Outcome::PayloadMismatch);
  }

  void explicitRequestHashIsUsed() {
    auto req = request("k1", "o1");
    req.requestHash = "caller-hash";
    QCOMPARE(client_->begin(req).outcome, Outcome::Executed);
    auto other = request("k1", "o1", TriggerSource::Http, R"({"different": true})");
    other.requestHash = "caller-hash";
    QCOMPARE(client_->begin(other).outcome, Outcome::InProgress);
  }

  void newKeyForSucceededBusinessObjectIsRejected() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, "{}", token).ok());
    const BeginResult r = client_->begin(request("k2", "o1", TriggerSource::Llm));
    QCOMPARE(r.outcome, Outcome::Rejected);
    QVERIFY(!r.version.has_value());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k2'"), 0LL);
    QCOMPARE(
        count(
            "SELECT count(*) FROM idem.attempts WHERE idempotency_key='k2' AND outcome='rejected'"),
        1LL);
  }

  void newKeyForBusinessObjectInFlightIsRejected() {
    const std::string token = claim(request("k1", "o1"));
    QCOMPARE(client_->begin(request("k2", "o1", TriggerSource::Llm)).outcome, Outcome::Rejected);
    QVERIFY(client_->markUnknown("k1", 1, "timeout", token).ok());
    QCOMPARE(client_->begin(request("k3", "o1", TriggerSource::Llm)).outcome, Outcome::Rejected);
  }

  void newKeyAfterFailureMayRunAgain() {
    const std::string t1 = claim(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "connection refused", t1, true).ok());
    const std::string t2 = claim(request("k2", "o1", TriggerSource::Llm));
    // ...and then the old FAILED key cannot be re-claimed while k2 is live.
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Framework));
    QCOMPARE(r.outcome, Outcome::Rejected);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"),
             std::string("FAILED"));
    QVERIFY(client_->complete("k2", 1, "{}", t2).ok());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id='o1' AND status='SUCCESS'"),
             1LL);
  }

  // A new key for an object whose money moved under a key that failed: another run charges again.
  void newKeyForBusinessObjectWhoseMoneyMovedIsRejected() {
    const std::string t1 = claim(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "declined", t1).ok());
    client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k1"});
    const BeginResult r = client_->begin(request("k2", "o1", TriggerSource::Llm));
    QCOMPARE(r.outcome, Outcome::Rejected);
    QVERIFY(!r.claimToken);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k2'"), 0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k2'"), 0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='k2'"), 1LL);
    QCOMPARE(text("SELECT outcome FROM idem.attempts WHERE idempotency_key='k2'"),
             std::string("rejected"));
    // Refunded in full: nothing moved any more, a new key may run.
    client_->recordFundFlow({"payment", "o1", FundFlowKind::Refund, 2990, "CNY", "gw-2", "k1"});
    QCOMPARE(client_->begin(request("k3", "o1")).outcome, Outcome::Executed);
  }

  // Every allowed row of the contract's state machine, through the functions.
  void everyAllowedTransitionThroughFunctions() {
    // system: PROCESSING -> SUCCESS
    std::string t = claim(request("a", "oa"));
    QVERIFY(client_->complete("a", 1, "{}", t).ok());
    // system: PROCESSING -> FAILED (retryable), FAILED -> PROCESSING, PROCESSING -> UNKNOWN ->
    // SUCCESS
    t = claim(request("b", "ob"));
    QVERIFY(client_->fail("b", 1, "x", t, true).ok());
    t = claim(request("b", "ob"));
    QVERIFY(client_->markUnknown("b", 3, "timeout", t).ok());
    QVERIFY(client_->complete("b", 4, "{}", t).ok());
    // system: PROCESSING -> UNKNOWN by the sweep
    claimExpired("c", "oc");
    QCOMPARE(client_->expireLeases(), 1);
    // reconciler: UNKNOWN -> FAILED, UNKNOWN -> SUCCESS, PROCESSING past lease -> SUCCESS / FAILED
    QVERIFY(client_
                ->resolve("c", 2, RecordStatus::Failed, "gateway: no such payment",
                          R"({"lookup": "none"})")
                .ok());
    t = claim(request("d", "od"));
    QVERIFY(client_->markUnknown("d", 1, "timeout", t).ok());
    QVERIFY(
        client_->resolve("d", 2, RecordStatus::Success, "gateway: paid", R"({"lookup": "gw-d"})")
            .ok());
    claimExpired("e", "oe");
    QVERIFY(
        client_->resolve("e", 1, RecordStatus::Success, "gateway: paid", R"({"lookup": "gw-e"})")
            .ok());
    claimExpired("f", "of");
    QVERIFY(
        client_->resolve("f", 1, RecordStatus::Failed, "gateway: nothing", R"({"lookup": "none"})")
            .ok());
    // reconciler through reconcile: UNKNOWN -> SUCCESS from a flow under the key
    t = claim(request("g", "og"));
    QVERIFY(client_->markUnknown("g", 1, "timeout", t).ok());
    client_->recordFundFlow({"payment", "og", FundFlowKind::Debit, 10, "CNY", "gw-g", "g"});
    QCOMPARE(client_->reconcile(), 1);
    // operator: PROCESSING past lease -> SUCCESS / FAILED, UNKNOWN -> SUCCESS / FAILED, FAILED ->
    // SUCCESS
    claimExpired("h", "oh");
    QVERIFY(client_->settle("h", 1, RecordStatus::Success, "statement shows charge", std::nullopt)
                .ok());
    claimExpired("i", "oi");
    QVERIFY(
        client_
            ->settle("i", 1, RecordStatus::Failed, "gateway: no such payment", R"({"ref": null})")
            .ok());
    t = claim(request("j", "oj"));
    QVERIFY(client_->markUnknown("j", 1, "timeout", t).ok());
    QVERIFY(client_->settle("j", 2, RecordStatus::Success, "paid", std::nullopt).ok());
    t = claim(request("k", "ok"));
    QVERIFY(client_->markUnknown("k", 1, "timeout", t).ok());
    QVERIFY(client_->settle("k", 2, RecordStatus::Failed, "not paid", std::nullopt).ok());
    QVERIFY(client_
                ->settle("k", 3, RecordStatus::Success,
                         "correction: the statement shows it after all", std::nullopt)
                .ok());

    const std::string seen = text(
        "SELECT string_agg(DISTINCT coalesce(from_status, 'none') || '>' || to_status || ':' || "
        "actor_kind, ' ' "
        "ORDER BY coalesce(from_status, 'none') || '>' || to_status || ':' || actor_kind) FROM "
        "idem.transitions");
    QCOMPARE(
        QString::fromStdString(seen),
        QStringLiteral(
            "FAILED>PROCESSING:system FAILED>SUCCESS:operator PROCESSING>FAILED:operator "
            "PROCESSING>FAILED:reconciler PROCESSING>FAILED:system PROCESSING>SUCCESS:operator "
            "PROCESSING>SUCCESS:reconciler PROCESSING>SUCCESS:system PROCESSING>UNKNOWN:system "
            "UNKNOWN>FAILED:operator UNKNOWN>FAILED:reconciler UNKNOWN>SUCCESS:operator "
            "UNKNOWN>SUCCESS:reconciler UNKNOWN>SUCCESS:system none>PROCESSING:system"));
    // Versions are consecutive per record and match the history.
    QCOMPARE(count("SELECT count(*) FROM idem.records r WHERE version <> (SELECT max(version) FROM "
                   "idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.records r WHERE version <> (SELECT count(*) FROM "
                   "idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"),
             0LL);
    QCOMPARE(text("SELECT evidence::text FROM idem.transitions WHERE idempotency_key='i' AND "
                  "actor_kind='operator'"),
             std::string(R"({"ref": null})"));
    QCOMPARE(text("SELECT reason FROM idem.transitions WHERE idempotency_key='h' AND "
                  "actor_kind='operator'"),
             std::string("statement shows charge"));
    QCOMPARE(text("SELECT evidence::text FROM idem.transitions WHERE idempotency_key='c' AND "
                  "actor_kind='reconciler'"),
             std::string(R"({"lookup": "none"})"));
    // Deciding FAILED declares the side effect did not happen: the same request may run again.
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key IN ('c', 'f', 'i') AND "
                   "status='FAILED' AND retry_allowed"),
             3LL);
  }

  // Every transition outside the table is refused by the functions with a result code.
  void refusedTransitionsThroughFunctions() {
    const std::string ts = claim(request("s", "os"));
    QVERIFY(client_->complete("s", 1, "{}", ts).ok());
    const std::string before = recordRow("s");
    ChangeResult r = client_->complete("s", 2, "{}", ts);
    QCOMPARE(r.result, ResultCode::InvalidTransition);
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    expectEveryAnswerRefused("s", ts, RecordStatus::Failed);
    QCOMPARE(recordRow("s"), before);

    const std::string tf = claim(request("f", "of"));
    QVERIFY(client_->fail("f", 1, "x", tf, true).ok());
    expectEveryAnswerRefused("f", tf, RecordStatus::Success);

    // v2: nobody but evidence or a person declares an uncertain outcome failed.
    const std::string tu = claim(request("u", "ou"));
    QVERIFY(client_->markUnknown("u", 1, "timeout", tu).ok());
    const std::string unknownBefore = recordRow("u");
    QCOMPARE(client_->markUnknown("u", 2, "again", tu).result, ResultCode::InvalidTransition);
    QCOMPARE(client_->fail("u", 2, "declined after all", tu).result, ResultCode::InvalidTransition);
    QCOMPARE(client_->fail("u", 2, "declined after all", tu, true).result,
             ResultCode::InvalidTransition);
    QCOMPARE(recordRow("u"), unknownBefore);

    // v2: a PROCESSING record whose lease is live is its claimant's.
    claim(request("p", "op"));
    const std::string processingBefore = recordRow("p");
    r = client_->settle("p", 1, RecordStatus::Failed, "looks stuck", std::nullopt);
    QCOMPARE(r.result, ResultCode::LeaseActive);
    QCOMPARE(r.status, std::optional(RecordStatus::Processing));
    QCOMPARE(r.version, std::optional(1));
    QCOMPARE(client_->settle("p", 1, RecordStatus::Success, "looks paid", std::nullopt).result,
             ResultCode::LeaseActive);
    QCOMPARE(client_->resolve("p", 1, RecordStatus::Success, "lookup", R"({"e": 1})").result,
             ResultCode::LeaseActive);
    QCOMPARE(recordRow("p"), processingBefore);

    QCOMPARE(client_->complete("nope", 1, "{}", ts).result, ResultCode::NotFound);
    QVERIFY(!client_->complete("nope", 1, "{}", ts).version.has_value());
    QCOMPARE(client_->settle("nope", 1, RecordStatus::Success, "x", std::nullopt).result,
             ResultCode::NotFound);
    QCOMPARE(client_->resolve("nope", 1, RecordStatus::Success, "x", R"({"e": 1})").result,
             ResultCode::NotFound);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='s'"), 2LL);
  }

  // Without the token nothing changes and nothing is told: no status, no version.
  void strangerGetsNotClaimantAndLearnsNothing() {
    const std::string token = claim(request("k1", "o1"));
    const std::string before = recordRow("k1");
    const std::string wrong = "00000000-0000-4000-8000-000000000000";
    for (int version : {0, 1, 2}) {
      for (const ChangeResult& r : {client_->complete("k1", version, R"({"forged": true})", wrong),
                                    client_->fail("k1", version, "forged", wrong, true),
                                    client_->markUnknown("k1", version, "forged", wrong),
                                    client_->complete("k1", version, "{}", "")}) {
        QCOMPARE(r.result, ResultCode::NotClaimant);
        QVERIFY(!r.status.has_value());
        QVERIFY(!r.version.has_value());
      }
    }
    QCOMPARE(recordRow("k1"), before);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k1'"), 1LL);
    QVERIFY(client_->complete("k1", 1, "{}", token).ok());
  }

  void staleVersionIsAConflictAndChangesNothing() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "timeout", token).ok());
    const std::string before = recordRow("k1");
    const ChangeResult r =
        client_->settle("k1", 1, RecordStatus::Success, "stale view", std::nullopt);
    QCOMPARE(r.result, ResultCode::Conflict);
    QCOMPARE(r.status, std::optional(RecordStatus::Unknown));
    QCOMPARE(r.version, std::optional(2));
    QCOMPARE(client_->complete("k1", 7, "{}", token).result, ResultCode::Conflict);
    QCOMPARE(client_->resolve("k1", 1, RecordStatus::Success, "stale", R"({"e": 1})").result,
             ResultCode::Conflict);
    QCOMPARE(recordRow("k1"), before);
  }

  // Direct UPDATEs (as the owner, who has the rights) meet the same trigger.
  void directUpdatesOutsideTheTableAreRefused() {
    std::string t = claim(request("s", "os"));
    QVERIFY(client_->complete("s", 1, "{}", t).ok());
    t = claim(request("f", "of"));
    QVERIFY(client_->fail("f", 1, "x", t).ok());
    t = claim(request("u", "ou"));
    QVERIFY(client_->markUnknown("u", 1, "x", t).ok());
    claim(request("p", "op"));

    const char* refused[][2] = {
        {"s", "PROCESSING"}, {"s", "FAILED"},     {"s", "UNKNOWN"}, {"f", "SUCCESS"},
        {"f", "UNKNOWN"},    {"u", "PROCESSING"}, {"u", "FAILED"},
    };
    for (const auto& [key, to] : refused) {
      const std::string before = recordRow(key);
      std::string message;
      const int cls = sqlstateOf(
          [&] {
            translatingErrors("update", [&] {
              pqxx::nontransaction tx(*conn_);
              tx.exec(std::string("UPDATE idem.records SET status = '") + to +
                      "' WHERE idempotency_key = '" + key + "'");
            });
          },
          &message);
      QVERIFY2(cls == 23000, (std::string(key) + " -> " + to + " was not refused").c_str());
      QVERIFY2(message.find("is not a transition the state machine allows") != std::string::npos,
               message.c_str());
      QCOMPARE(recordRow(key), before);
    }
    // Not a status at all: the CHECK constraint names it.
    std::string message;
    QCOMPARE(sqlstateOf(
                 [&] {
                   translatingErrors("update", [&] {
                     pqxx::nontransaction tx(*conn_);
                     tx.exec("UPDATE idem.records SET status = 'DONE' WHERE idempotency_key = 'p'");
                   });
                 },
                 &message),
             23000);
    QVERIFY2(message.find("record_status_valid") != std::string::npos, message.c_str());
    // Identity columns never change.
    QCOMPARE(sqlstateOf([&] {
               translatingErrors("update", [&] {
                 pqxx::nontransaction tx(*conn_);
                 tx.exec("UPDATE idem.records SET biz_id = 'other' WHERE idempotency_key = 'p'");
               });
             }),
             23000);
    // A PROCESSING record always has a lease.
    QCOMPARE(
        sqlstateOf(
            [&] {
              translatingErrors("update", [&] {
                pqxx::nontransaction tx(*conn_);
                tx.exec(
                    "UPDATE idem.records SET lease_expires_at = NULL WHERE idempotency_key = 'p'");
              });
            },
            &message),
        23000);
    QVERIFY2(message.find("needs a lease") != std::string::npos, message.c_str());
    QVERIFY(
        text("SELECT lease_expires_at IS NOT NULL FROM idem.records WHERE idempotency_key = 'p'") ==
        "t");
    // A record is never born anything but PROCESSING, and only through idem.begin.
    QCOMPARE(sqlstateOf([&] {
               translatingErrors("insert", [&] {
                 pqxx::nontransaction tx(*conn_);
                 tx.exec(
                     "INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, "
                     "request_hash, status) VALUES ('x', 'payment', 'ox', 'pay', 'h', 'SUCCESS')");
               });
             }),
             23000);
    QCOMPARE(sqlstateOf(
                 [&] {
                   translatingErrors("insert", [&] {
                     pqxx::nontransaction tx(*conn_);
                     tx.exec(
                         "INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, "
                         "request_hash, status, lease_expires_at) VALUES ('x', 'payment', 'ox', "
                         "'pay', 'h', 'PROCESSING', now())");
                   });
                 },
                 &message),
             23000);
    QVERIFY2(message.find("only by idem.begin()") != std::string::npos, message.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key='x'"), 0LL);
    // History is append-only.
    QCOMPARE(sqlstateOf([&] {
               translatingErrors("update", [&] {
                 pqxx::nontransaction tx(*conn_);
                 tx.exec("UPDATE idem.transitions SET reason = 'rewritten'");
               });
             }),
             23000);
    QCOMPARE(sqlstateOf([&] {
               translatingErrors("update", [&] {
                 pqxx::nontransaction tx(*conn_);
                 tx.exec("UPDATE idem.attempts SET outcome = 'executed'");
               });
             }),
             23000);
  }

  // Pretending to be an operator or a reconciler in a direct UPDATE does not lift the row's
  // conditions: a live lease, a final failure, the side effect recorded, a reason, evidence.
  void forgedActorInDirectUpdateMeetsTheRowConditions() {
    claim(request("p", "op"));
    std::string t = claim(request("f", "of"));
    QVERIFY(client_->fail("f", 1, "declined", t).ok());
    claimExpired("m", "om");
    client_->recordFundFlow({"payment", "om", FundFlowKind::Capture, 10, "CNY", "gw-m", "m"});
    const struct {
      const char* key;
      const char* kind;
      const char* reason;
      const char* evidence;
      const char* to;
      const char* says;
    } cases[] = {
        {"p", "operator", "stuck", "", "FAILED", "its claimant may still answer"},
        {"p", "reconciler", "stuck", R"({"e": 1})", "SUCCESS", "its claimant may still answer"},
        {"f", "system", "retry", "", "PROCESSING", "the failure is final"},
        {"m", "operator", "no charge", "", "FAILED",
         "the ledger records the side effect of payment om"},
        {"m", "reconciler", "no charge", R"({"e": 1})", "FAILED",
         "the ledger records the side effect of payment om"},
        {"m", "operator", " \t\n", "", "SUCCESS", "needs a reason"},
        {"m", "reconciler", "paid", "{}", "SUCCESS", "needs evidence"},
    };
    for (const auto& c : cases) {
      const std::string before = recordRow(c.key);
      std::string message;
      const int cls = sqlstateOf(
          [&] {
            translatingErrors("update", [&] {
              pqxx::work tx(*conn_);
              tx.exec_params("SELECT idem.act($1, $2, $3)", c.kind, c.reason, c.evidence);
              tx.exec(std::string("UPDATE idem.records SET status = '") + c.to +
                      "' WHERE idempotency_key = '" + c.key + "'");
              tx.commit();
            });
          },
          &message);
      QVERIFY2(cls == 23000,
               (std::string(c.key) + " " + c.kind + " -> " + c.to + " was not refused").c_str());
      QVERIFY2(message.find(c.says) != std::string::npos, message.c_str());
      QCOMPARE(recordRow(c.key), before);
    }
  }

  // An allowed direct UPDATE still leaves history, and says it bypassed the functions.
  void directAllowedUpdateLeavesHistory() {
    claim(request("p", "op"));
    {
      pqxx::nontransaction tx(*conn_);
      tx.exec(
          "UPDATE idem.records SET status = 'FAILED', version = 99 WHERE idempotency_key = 'p'");
    }
    QCOMPARE(count("SELECT version FROM idem.records WHERE idempotency_key='p'"), 2LL);
    QCOMPARE(
        text(
            "SELECT reason FROM idem.transitions WHERE idempotency_key='p' AND to_status='FAILED'"),
        std::string("direct UPDATE outside the protocol functions"));
  }

  void onlyOneSuccessPerBusinessObject() {
    // Even the owner, past the trigger's guard, cannot make two keys succeed for one object.
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, "{}", token).ok());
    std::string sqlstate;
    try {
      translatingErrors("insert", [&] {
        pqxx::work tx(*conn_);
        tx.exec("SELECT set_config('idem.creating', 'k2', true)");
        tx.exec(
            "INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, "
            "status, lease_expires_at) VALUES ('k2', 'payment', 'o1', 'pay', 'h', 'PROCESSING', "
            "now())");
        tx.commit();
      });
    } catch (const DatabaseError& e) {
      sqlstate = e.sqlstate();
    }
    QCOMPARE(sqlstate, std::string("23505"));
    // The operator's correction FAILED -> SUCCESS meets the same index when another key succeeded.
    const std::string t3 = claim(request("k3", "o3"));
    QVERIFY(client_->fail("k3", 1, "connection refused", t3, true).ok());
    const std::string t4 = claim(request("k4", "o3"));
    QVERIFY(client_->complete("k4", 1, "{}", t4).ok());
    sqlstate.clear();
    try {
      client_->settle("k3", 2, RecordStatus::Success, "correction", std::nullopt);
    } catch (const DatabaseError& e) {
      sqlstate = e.sqlstate();
    }
    QCOMPARE(sqlstate, std::string("23505"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id = 'o3' AND status = 'SUCCESS'"),
             1LL);
    // One unique index holds it (SUCCESS is one of the statuses it covers).
    QCOMPARE(count("SELECT count(*) FROM pg_indexes WHERE indexname='records_one_live_per_biz' "
                   "AND indexdef LIKE 'CREATE UNIQUE INDEX%' "
                   "AND indexdef LIKE '%WHERE ((status)::text <> ''FAILED''::text)%'"),
             1LL);
  }

  void badInputGivesClearErrorsAndChangesNothing() {
    claim(request("k1", "o1"));
    const long long attempts = count("SELECT count(*) FROM idem.attempts");
    const long long transitions = count("SELECT count(*) FROM idem.transitions");
    std::string message;

    QCOMPARE(sqlstateOf([&] { client_->begin(request(std::string(256, 'k'), "o2")); }, &message),
             22000);
    QVERIFY2(message.find("1 to 255 characters, got 256") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf([&] { client_->begin(request("", "o2")); }, &message), 22000);
    BeginRequest longest = request(std::string(255, 'k'), "o255");
    longest.traceId = "trace-longest";  // a trace id is bounded at 255 characters of its own
    QCOMPARE(client_->begin(longest).outcome, Outcome::Executed);

    QCOMPARE(
        sqlstateOf(
            [&] {
              pqxx::nontransaction tx(*conn_);
              translatingErrors("begin", [&] {
                tx.exec(
                    "SELECT * FROM idem.begin('k9', 'payment', 'o9', 'pay', NULL, 'cron', '{}')");
              });
            },
            &message),
        22000);
    QVERIFY2(message.find("unknown trigger_source 'cron'") != std::string::npos, message.c_str());

    QCOMPARE(
        sqlstateOf([&] { client_->settle("k1", 1, RecordStatus::Success, "   ", std::nullopt); },
                   &message),
        22000);
    QVERIFY2(message.find("settle needs a reason") != std::string::npos, message.c_str());
    QCOMPARE(
        sqlstateOf([&] { client_->settle("k1", 1, RecordStatus::Processing, "why", std::nullopt); },
                   &message),
        22000);
    QVERIFY2(message.find("SUCCESS or FAILED") != std::string::npos, message.c_str());

    FundFlowInput flow{"payment", "o1", FundFlowKind::Debit, 100, "cny", "gw-1", std::nullopt};
    QCOMPARE(sqlstateOf([&] { client_->recordFundFlow(flow); }, &message), 22000);
    QVERIFY2(message.find("three capital letters") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf(
                 [&] {
                   pqxx::nontransaction tx(*conn_);
                   translatingErrors("record_fund_flow", [&] {
                     tx.exec(
                         "SELECT * FROM idem.record_fund_flow('payment', 'o1', 'CHARGEBACK', 1, "
                         "'CNY', 'gw-2')");
                   });
                 },
                 &message),
             22000);
    QVERIFY2(message.find("unknown fund flow kind 'CHARGEBACK'") != std::string::npos,
             message.c_str());
    QCOMPARE(sqlstateOf(
                 [&] {
                   client_->begin([&] {
                     auto r = request("k5", "o5");
                     r.lease = std::chrono::milliseconds(0);
                     return r;
                   }());
                 },
                 &message),
             22000);
    QCOMPARE(sqlstateOf(
                 [&] {
                   client_->begin([&] {
                     auto r = request("k6", " ");
                     return r;
                   }());
                 },
                 &message),
             22000);

    QCOMPARE(count("SELECT count(*) FROM idem.attempts"), attempts + 1);  // only the 255-char key
    QCOMPARE(count("SELECT count(*) FROM idem.transitions"), transitions + 1);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), 0LL);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"),
             std::string("PROCESSING"));
  }

  void fundFlowsMarkDuplicatesAndIgnoreReingestion() {
    FundFlowResult first =
        client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k1"});
    QVERIFY(!first.isDuplicate);
    QVERIFY(!first.alreadyRecorded);
    FundFlowResult again =
        client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k1"});
    QCOMPARE(again.flowId, first.flowId);
    QVERIFY(again.alreadyRecorded);
    FundFlowResult dup =
        client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-2", "k1"});
    QVERIFY(dup.isDuplicate);
    QCOMPARE(count("SELECT duplicate_of FROM idem.fund_flows WHERE external_ref='gw-2'"),
             (long long)first.flowId);
    FundFlowResult dup2 = client_->recordFundFlow(
        {"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-3", std::nullopt});
    QCOMPARE(count("SELECT duplicate_of FROM idem.fund_flows WHERE external_ref='gw-3'"),
             (long long)first.flowId);
    QVERIFY(dup2.isDuplicate);
    // Another kind or another object is a first of its own.
    QVERIFY(!client_
                 ->recordFundFlow(
                     {"payment", "o1", FundFlowKind::Refund, 2990, "CNY", "gw-4", std::nullopt})
                 .isDuplicate);
    QVERIFY(!client_
                 ->recordFundFlow(
                     {"payment", "o2", FundFlowKind::Debit, 2990, "CNY", "gw-5", std::nullopt})
                 .isDuplicate);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), 5LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"), 2LL);
  }

  void settleSuccessStoresAReplayableResponse() {
    const std::string token = claim(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "timeout", token).ok());
    QVERIFY(client_
                ->settle("k1", 2, RecordStatus::Success, "gateway statement line 42",
                         R"({"gateway_ref": "gw-9"})")
                .ok());
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Callback));
    QCOMPARE(r.outcome, Outcome::Replayed);
    QVERIFY(r.responsePayload &&
            r.responsePayload->find("gateway statement line 42") != std::string::npos);
    // The operator's identity does not leak into later statements of the session.
    const std::string t2 = claim(request("k2", "o2"));
    QVERIFY(client_->complete("k2", 1, "{}", t2).ok());
    QCOMPARE(text("SELECT actor_kind FROM idem.transitions WHERE idempotency_key='k2' AND "
                  "to_status='SUCCESS'"),
             std::string("system"));
  }

  // The correction: a record settled FAILED whose money moved after all becomes SUCCESS, and is
  // then replayed, never run again.
  void settleCorrectsFailedToSuccess() {
    claimExpired("k1", "o1");
    QVERIFY(client_->settle("k1", 1, RecordStatus::Failed, "gateway: no such payment", std::nullopt)
                .ok());
    client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-late", "k1"});
    const ChangeResult r = client_->settle("k1", 2, RecordStatus::Success,
                                           "late statement line gw-late", R"({"ref": "gw-late"})");
    QVERIFY(r.ok());
    QCOMPARE(r.version, std::optional(3));
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Llm)).outcome, Outcome::Replayed);
    QCOMPARE(text("SELECT actor_kind || ' ' || from_status || '>' || to_status FROM "
                  "idem.transitions WHERE idempotency_key='k1' AND version=3"),
             std::string("operator FAILED>SUCCESS"));
  }

  void reconcileResolvesOnlyWithEvidenceUnderTheOwnKey() {
    // UNKNOWN with a DEBIT under its key: resolved. UNKNOWN with a flow under another key, or only
    // a FREEZE: left alone. PROCESSING past its lease with a CAPTURE under its key: resolved.
    // PROCESSING with a live lease: left alone.
    std::string t = claim(request("a", "oa"));
    QVERIFY(client_->markUnknown("a", 1, "timeout", t).ok());
    client_->recordFundFlow({"payment", "oa", FundFlowKind::Debit, 10, "CNY", "gw-a", "a"});
    t = claim(request("b", "ob"));
    QVERIFY(client_->markUnknown("b", 1, "timeout", t).ok());
    client_->recordFundFlow(
        {"payment", "ob", FundFlowKind::Debit, 10, "CNY", "gw-b", "someone-else"});
    client_->recordFundFlow({"payment", "ob", FundFlowKind::Freeze, 10, "CNY", "gw-b2", "b"});
    claimExpired("c", "oc");
    client_->recordFundFlow({"payment", "oc", FundFlowKind::Capture, 10, "CNY", "gw-c", "c"});
    claim(request("d", "od"));
    client_->recordFundFlow({"payment", "od", FundFlowKind::Debit, 10, "CNY", "gw-d", "d"});
    QCOMPARE(client_->reconcile(), 2);
    QCOMPARE(text("SELECT string_agg(idempotency_key || ':' || status, ' ' ORDER BY "
                  "idempotency_key) FROM idem.records"),
             std::string("a:SUCCESS b:UNKNOWN c:SUCCESS d:PROCESSING"));
    QCOMPARE(text("SELECT evidence -> 'flows' -> 0 ->> 'external_ref' FROM idem.transitions WHERE "
                  "idempotency_key='a' AND actor_kind='reconciler'"),
             std::string("gw-a"));
    QCOMPARE(count("SELECT (evidence -> 'flows' -> 0 ->> 'id')::bigint FROM idem.transitions WHERE "
                   "idempotency_key='c' AND actor_kind='reconciler'"),
             count("SELECT id FROM idem.fund_flows WHERE external_ref='gw-c'"));
    QCOMPARE(client_->reconcile(), 0);
    // Never FAILED: no flow is no evidence.
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE actor_kind='reconciler' AND "
                   "to_status='FAILED'"),
             0LL);
  }

  // While a purge holds its lock, begin cannot check a new key inside its insert (the purge may
  // commit between its statements) and checks it by a statement of its own: same answers.
  void beginWhilePurgeRunsChecksTheSlowWay() {
    std::string t = claim(request("gone", "og"));
    QVERIFY(client_->complete("gone", 1, "{}", t).ok());
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - interval '40 days'; "
        "ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
    QCOMPARE(count("SELECT tombstones_written FROM idem.purge(interval '30 days')"), 1LL);
    t = claim(request("failed", "of"));
    QVERIFY(client_->fail("failed", 1, "declined", t).ok());
    client_->recordFundFlow({"payment", "of", FundFlowKind::Debit, 10, "CNY", "gw-of", "failed"});

    auto purger = db_->connect();
    pqxx::work held(*purger);
    held.exec("SELECT pg_advisory_xact_lock(7347261900532)");  // as idem.purge does
    const BeginResult fresh = client_->begin(request("fresh", "ofresh"));
    QCOMPARE(fresh.outcome, Outcome::Executed);
    QVERIFY(fresh.claimToken);
    QCOMPARE(client_->begin(request("gone", "og", TriggerSource::Llm)).outcome, Outcome::Retired);
    QCOMPARE(client_->begin(request("gone-2", "og", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
    QCOMPARE(client_->begin(request("failed-2", "of", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
    held.commit();
    QVERIFY(client_->complete("fresh", 1, "{}", *fresh.claimToken).ok());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key IN ('gone', 'gone-2', "
                   "'failed-2')"),
             0LL);
    // No history for what was not run (the retired key's own, older history stays as purge left
    // it).
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key IN ('gone-2', "
                   "'failed-2') OR (idempotency_key = 'gone' AND version = 1 AND id > (SELECT "
                   "min(id) FROM idem.transitions WHERE idempotency_key = 'gone'))"),
             0LL);
    // And the fast path gives the same answers.
    QCOMPARE(client_->begin(request("gone", "og", TriggerSource::Llm)).outcome, Outcome::Retired);
    QCOMPARE(client_->begin(request("gone-3", "og", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
    QCOMPARE(client_->begin(request("failed-3", "of", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
  }

  void purgeRemovesOnlyOldTerminalRowsAndLeavesTombstones() {
    std::string t = claim(request("old", "o1"));
    QVERIFY(client_->complete("old", 1, "{}", t).ok());
    claim(request("stuck", "o2"));
    t = claim(request("new", "o3"));
    QVERIFY(client_->complete("new", 1, "{}", t).ok());
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - interval '40 days' WHERE idempotency_key IN "
        "('old', 'stuck'); "
        "ALTER TABLE idem.records ENABLE TRIGGER records_guard; "
        "ALTER TABLE idem.attempts DISABLE TRIGGER attempts_append_only; "
        "UPDATE idem.attempts SET created_at = now() - interval '40 days' WHERE idempotency_key IN "
        "('old', 'stuck'); "
        "ALTER TABLE idem.attempts ENABLE TRIGGER attempts_append_only; "
        "ALTER TABLE idem.transitions DISABLE TRIGGER transitions_append_only; "
        "UPDATE idem.transitions SET created_at = now() - interval '40 days' WHERE idempotency_key "
        "IN ('old', 'stuck'); "
        "ALTER TABLE idem.transitions ENABLE TRIGGER transitions_append_only;");
    QCOMPARE(text("SELECT (p)::text FROM idem.purge(interval '30 days') p"),
             std::string("(1,1,2,1)"));
    QCOMPARE(count("SELECT count(*) FROM idem.records"), 2LL);  // stuck PROCESSING is never purged
    // ...nor its history.
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='stuck'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='stuck'"), 1LL);
    QCOMPARE(
        text("SELECT status || ' ' || biz_id FROM idem.retired_keys WHERE idempotency_key='old'"),
        std::string("SUCCESS o1"));
    // The key never runs again, nor does the paid object under a new key.
    const BeginResult late = client_->begin(request("old", "o1", TriggerSource::Llm));
    QCOMPARE(late.outcome, Outcome::Retired);
    QVERIFY(!late.claimToken);
    QCOMPARE(client_->begin(request("old-2", "o1", TriggerSource::Llm)).outcome, Outcome::Rejected);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id='o1'"), 0LL);
    QCOMPARE(
        count(
            "SELECT count(*) FROM idem.attempts WHERE idempotency_key='old' AND outcome='retired'"),
        1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='old-2' AND "
                   "outcome='rejected'"),
             1LL);
    QCOMPARE(
        count("SELECT count(*) FROM idem.transitions WHERE idempotency_key IN ('old', 'old-2')"),
        0LL);
    // Tombstones go on their own, longer horizon.
    QCOMPARE(count("SELECT idem.purge_retired(interval '1 day')"), 0LL);
    db_->exec("UPDATE idem.retired_keys SET retired_at = now() - interval '400 days'");
    QCOMPARE(count("SELECT idem.purge_retired(interval '365 days')"), 1LL);
  }
  // Retention drops a whole day of history at once. What the day holds of a record still open (or
  // failed too recently to go) is kept, ids and all; what it holds of a paid key goes, and the key
  // stays retired.
  void purgeDropsWholeDaysOfHistoryAndKeepsWhatIsStillOpen() {
    std::string t = claim(request("paid", "h1"));
    QVERIFY(client_->complete("paid", 1, "{}", t).ok());
    claim(request("open", "h2"));
    t = claim(request("failed", "h3"));
    QVERIFY(client_->fail("failed", 1, "declined", t).ok());
    t = claim(request("recent", "h4"));
    QVERIFY(client_->complete("recent", 1, "{}", t).ok());
    const std::string day = makeHistoryDay(40);
    ageHistory("'paid', 'open', 'failed', 'recent'", 40);
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - interval '40 days' WHERE idempotency_key = "
        "'paid'; ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
    QCOMPARE(count("SELECT count(*) FROM idem.attempts_p" + day), 4LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions_p" + day), 7LL);
    const std::string keptAttempts = historyIds("attempts", "'open', 'failed'");
    const std::string keptTransitions = historyIds("transitions", "'open', 'failed'");

    // One record purged; of the day's history, paid's and recent's rows (a SUCCESS record's
    // history goes with its day, as it went row by row before).
    QCOMPARE(text("SELECT (p)::text FROM idem.purge(interval '30 days') p"),
             std::string("(1,2,4,1)"));
    QCOMPARE(text("SELECT coalesce(to_regclass('idem.attempts_p" + day +
                  "')::text, 'gone') || ' ' || coalesce(to_regclass('idem.transitions_p" + day +
                  "')::text, 'gone')"),
             std::string("gone gone"));
    // Kept, with the same ids, now in the DEFAULT partition.
    QCOMPARE(historyIds("attempts", "'open', 'failed'"), keptAttempts);
    QCOMPARE(historyIds("transitions", "'open', 'failed'"), keptTransitions);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts_outside WHERE idempotency_key IN ('open', "
                   "'failed')"),
             2LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions_outside WHERE idempotency_key IN "
                   "('open', 'failed')"),
             3LL);
    QCOMPARE(
        count("SELECT count(*) FROM idem.attempts WHERE idempotency_key IN ('paid', 'recent')"),
        0LL);
    QCOMPARE(
        count("SELECT count(*) FROM idem.transitions WHERE idempotency_key IN ('paid', 'recent')"),
        0LL);
    // The paid key never runs again, nor its object under a new key.
    QCOMPARE(client_->begin(request("paid", "h1", TriggerSource::Llm)).outcome, Outcome::Retired);
    QCOMPARE(client_->begin(request("paid-2", "h1", TriggerSource::Llm)).outcome,
             Outcome::Rejected);
    // The kept rows go by the row rule once their record does.
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET status = 'SUCCESS', updated_at = now() - interval '40 days' "
        "WHERE idempotency_key = 'open'; ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
    QCOMPARE(text("SELECT (p)::text FROM idem.purge(interval '30 days') p"),
             std::string("(1,1,1,1)"));
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key = 'open'"), 0LL);
  }

  // One batch of purge_records at 30 days, from `from` on: records, tombstones, and how many
  // days back next_from is (none when nothing went).
  std::string batch(int limit, const std::string& from = "NULL") {
    return text(
        "SELECT p.records_deleted || ' ' || p.tombstones_written || ' ' || "
        "coalesce(round(extract(epoch FROM now() - p.next_from) / 86400)::text, 'none') "
        "FROM idem.purge_records(interval '30 days', " +
        std::to_string(limit) + ", " + from + ") AS p");
  }

  // Retention in batches: the oldest settled records first, at most a batch a call, each with its
  // tombstone; a record a writer holds is skipped, not waited for, and goes in a later purge.
  void purgeRecordsGoesABatchAtATimeAndSkipsWhatAWriterHolds() {
    for (int i = 0; i < 5; ++i) {
      const std::string key = "k" + std::to_string(i);
      const std::string t = claim(request(key, "b" + std::to_string(i)));
      QVERIFY(client_->complete(key, 1, "{}", t).ok());
    }
    claim(request("open", "bo"));
    // k0 is the oldest (44 days), k4 the youngest (40); open is as old and never goes.
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - (44 - "
        "coalesce(nullif(substr(idempotency_key, "
        "2), 'pen')::int, 0)) * interval '1 day'; "
        "ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
    QCOMPARE(batch(2), std::string("2 2 43"));  // k0 and k1
    QCOMPARE(text("SELECT string_agg(idempotency_key, ' ' ORDER BY idempotency_key) FROM "
                  "idem.retired_keys"),
             std::string("k0 k1"));

    // A writer holds k2 (a re-claim would): the next batch skips it at once.
    auto writer = db_->connect();
    pqxx::work held(*writer);
    held.exec("SELECT 1 FROM idem.records WHERE idempotency_key = 'k2' FOR UPDATE");
    QCOMPARE(batch(2), std::string("2 2 40"));  // k3 and k4
    QCOMPARE(text("SELECT string_agg(idempotency_key, ' ' ORDER BY idempotency_key) FROM "
                  "idem.records"),
             std::string("k2 open"));
    held.commit();
    // A batch from the previous one's next_from on leaves k2, older, for a later purge.
    QCOMPARE(batch(2, "now() - interval '40 days 1 hour'"), std::string("0 0 none"));
    QCOMPARE(batch(2), std::string("1 1 42"));
    QCOMPARE(batch(2), std::string("0 0 none"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key = 'open'"), 1LL);
    QCOMPARE(client_->begin(request("k2", "b2", TriggerSource::Llm)).outcome, Outcome::Retired);
    QCOMPARE(client_->begin(request("k2-again", "b2", TriggerSource::Llm)).outcome,
             Outcome::Rejected);

    // The history is a step of its own, and refuses what retention refuses.
    QCOMPARE(text("SELECT (p)::text FROM idem.purge_history(interval '30 days') p"),
             std::string("(0,0)"));
    for (const char* bad :
         {"idem.purge_records(interval '30 days', 0)", "idem.purge_records(interval '0 days', 5)",
          "idem.purge_history(interval '-1 day')"}) {
      try {
        db_->exec(std::string("SELECT * FROM ") + bad);
        QFAIL(bad);
      } catch (const pqxx::sql_error& e) {
        QCOMPARE(std::string(e.sqlstate()), std::string("22023"));
        QVERIFY2(std::string(e.what()).find("purge needs") != std::string::npos, e.what());
      }
    }
  }

  // A write on a day no partition covers is not refused: it waits in the DEFAULT partition, and
  // prepare_history_partitions moves it into the day's partition when it makes it.
  void historyWithoutItsDayPartitionIsKeptAndMovedLater() {
    const std::string today = text("SELECT to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD')");
    db_->exec(
        "DROP TABLE IF EXISTS idem.attempts_before_days, idem.transitions_before_days; "
        "DROP TABLE idem.attempts_p" +
        today + ", idem.transitions_p" + today);
    const std::string t = claim(request("k", "o"));
    QVERIFY(client_->complete("k", 1, "{}", t).ok());
    const std::string before =
        historyIds("attempts", "'k'") + " / " + historyIds("transitions", "'k'");
    QCOMPARE(count("SELECT count(*) FROM idem.attempts_outside") +
                 count("SELECT count(*) FROM idem.transitions_outside"),
             3LL);
    QCOMPARE(count("SELECT idem.prepare_history_partitions()"), 2LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts_outside") +
                 count("SELECT count(*) FROM idem.transitions_outside"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts_p" + today) +
                 count("SELECT count(*) FROM idem.transitions_p" + today),
             3LL);
    QCOMPARE(historyIds("attempts", "'k'") + " / " + historyIds("transitions", "'k'"), before);
    QCOMPARE(count("SELECT idem.prepare_history_partitions()"), 0LL);  // nothing left to make
  }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "tst_protocol.moc"

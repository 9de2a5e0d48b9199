// The protocol functions, one behaviour at a time, against a real PostgreSQL: every begin outcome
// with its attempt row, every row of the state machine and every refused transition (through the
// functions and through direct UPDATEs), fund flows, and bad input that changes nothing.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"

using namespace idem;

namespace {

BeginRequest request(const std::string& key, const std::string& bizId,
                     TriggerSource source = TriggerSource::Initial,
                     const std::string& payload = R"({"amount": 2990, "currency": "CNY"})") {
  BeginRequest r;
  r.key = key;
  r.bizType = "payment";
  r.bizId = bizId;
  r.tool = "pay";
  r.source = source;
  r.requestPayload = payload;
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
  int sqlstateOf(const std::function<void()>& fn, std::string* message = nullptr) {
    try {
      fn();
    } catch (const DatabaseError& e) {
      if (message) *message = e.what();
      return std::stoi(e.sqlstate().substr(0, 2)) * 1000;  // class only, e.g. 22000, 23000
    }
    return 0;
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_protocol");
  }
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
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='k1' AND outcome='executed' AND trigger_source='initial' AND agent_id='agent-1' AND trace_id='trace-k1'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k1' AND from_status IS NULL AND to_status='PROCESSING' AND version=1 AND actor_kind='system' AND actor=session_user"), 1LL);
    QCOMPARE(text("SELECT request_hash FROM idem.records WHERE idempotency_key='k1'"),
             text("SELECT encode(sha256(convert_to('{\"amount\": 2990, \"currency\": \"CNY\"}'::jsonb::text, 'UTF8')), 'hex')"));
    QVERIFY(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k1' AND lease_expires_at > now() + interval '25 seconds'") == 1);
  }

  void beginSameKeyWhileProcessingIsInProgress() {
    client_->begin(request("k1", "o1"));
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Http));
    QCOMPARE(r.outcome, Outcome::InProgress);
    QCOMPARE(r.status, std::optional(RecordStatus::Processing));
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='k1' AND outcome='in_progress' AND trigger_source='http'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions"), 1LL);
  }

  void beginAfterSuccessReplaysStoredResponse() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, R"({"charged": true, "ref": "gw-1"})").ok());
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Llm));
    QCOMPARE(r.outcome, Outcome::Replayed);
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    QCOMPARE(r.version, std::optional(2));
    QVERIFY(r.responsePayload.has_value());
    QCOMPARE(QString::fromStdString(*r.responsePayload), QStringLiteral(R"({"ref": "gw-1", "charged": true})"));
  }

  void beginOnUnknownIsInProgressNeverReexecuted() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "response timeout after 5s").ok());
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome, Outcome::InProgress);
  }

  void expiredLeaseIsStillInProgress() {
    auto req = request("k1", "o1");
    req.lease = std::chrono::milliseconds(1);
    client_->begin(req);
    QTest::qWait(20);
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome, Outcome::InProgress);
    QCOMPARE(client_->expireLeases(), 1);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"), std::string("UNKNOWN"));
    QCOMPARE(text("SELECT reason FROM idem.transitions WHERE to_status='UNKNOWN'"), std::string("lease expired"));
    QCOMPARE(client_->expireLeases(), 0);
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Framework)).outcome, Outcome::InProgress);
  }

  void failedIsReclaimedBySameHashOnly() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "card declined").ok());
    // A different payload under the same key is a mismatch even when FAILED.
    QCOMPARE(client_->begin(request("k1", "o1", TriggerSource::Llm, R"({"amount": 1})")).outcome,
             Outcome::PayloadMismatch);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"), std::string("FAILED"));
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Framework));
    QCOMPARE(r.outcome, Outcome::Executed);
    QCOMPARE(r.version, std::optional(3));
    QCOMPARE(count("SELECT attempt_count FROM idem.records WHERE idempotency_key='k1'"), 2LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='k1' AND from_status='FAILED' AND to_status='PROCESSING' AND version=3"), 1LL);
    QCOMPARE(text("SELECT actor_kind || ': ' || reason FROM idem.transitions WHERE idempotency_key='k1' AND from_status='FAILED'"),
             std::string("system: retried after FAILED (framework)"));
    QVERIFY(client_->complete("k1", 3, "{}").ok());
  }

  void payloadMismatchLeavesRecordUntouched() {
    client_->begin(request("k1", "o1"));
    const std::string before = recordRow("k1");
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Llm, R"({"amount": 3990})"));
    QCOMPARE(r.outcome, Outcome::PayloadMismatch);
    QCOMPARE(recordRow("k1"), before);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE outcome='payload_mismatch' AND trigger_source='llm'"), 1LL);
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
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, "{}").ok());
    const BeginResult r = client_->begin(request("k2", "o1", TriggerSource::Llm));
    QCOMPARE(r.outcome, Outcome::Rejected);
    QVERIFY(!r.version.has_value());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key='k2'"), 0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key='k2' AND outcome='rejected'"), 1LL);
  }

  void newKeyForBusinessObjectInFlightIsRejected() {
    client_->begin(request("k1", "o1"));
    QCOMPARE(client_->begin(request("k2", "o1", TriggerSource::Llm)).outcome, Outcome::Rejected);
    QVERIFY(client_->markUnknown("k1", 1, "timeout").ok());
    QCOMPARE(client_->begin(request("k3", "o1", TriggerSource::Llm)).outcome, Outcome::Rejected);
  }

  void newKeyAfterFailureMayRunAgain() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->fail("k1", 1, "declined").ok());
    QCOMPARE(client_->begin(request("k2", "o1", TriggerSource::Llm)).outcome, Outcome::Executed);
    // ...and then the old FAILED key cannot be re-claimed while k2 is live.
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Framework));
    QCOMPARE(r.outcome, Outcome::Rejected);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"), std::string("FAILED"));
    QVERIFY(client_->complete("k2", 1, "{}").ok());
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id='o1' AND status='SUCCESS'"), 1LL);
  }

  // Every allowed row of the contract's state machine, through the functions.
  void everyAllowedTransitionThroughFunctions() {
    struct Case { const char* path; };
    // PROCESSING -> SUCCESS
    client_->begin(request("a", "oa"));
    QVERIFY(client_->complete("a", 1, "{}").ok());
    // PROCESSING -> FAILED, FAILED -> PROCESSING
    client_->begin(request("b", "ob"));
    QVERIFY(client_->fail("b", 1, "x").ok());
    QCOMPARE(client_->begin(request("b", "ob")).outcome, Outcome::Executed);
    // PROCESSING -> UNKNOWN -> SUCCESS
    QVERIFY(client_->markUnknown("b", 3, "timeout").ok());
    QVERIFY(client_->complete("b", 4, "{}").ok());
    // PROCESSING -> UNKNOWN -> FAILED
    client_->begin(request("c", "oc"));
    QVERIFY(client_->markUnknown("c", 1, "timeout").ok());
    QVERIFY(client_->fail("c", 2, "gateway says no charge").ok());
    // operator: PROCESSING -> SUCCESS, PROCESSING -> FAILED, UNKNOWN -> SUCCESS, UNKNOWN -> FAILED
    client_->begin(request("d", "od"));
    QVERIFY(client_->settle("d", 1, RecordStatus::Success, "statement shows charge", std::nullopt).ok());
    client_->begin(request("e", "oe"));
    QVERIFY(client_->settle("e", 1, RecordStatus::Failed, "gateway: no such payment", R"({"ref": null})").ok());
    client_->begin(request("f", "of"));
    QVERIFY(client_->markUnknown("f", 1, "timeout").ok());
    QVERIFY(client_->settle("f", 2, RecordStatus::Success, "paid", std::nullopt).ok());
    client_->begin(request("g", "og"));
    QVERIFY(client_->markUnknown("g", 1, "timeout").ok());
    QVERIFY(client_->settle("g", 2, RecordStatus::Failed, "not paid", std::nullopt).ok());

    const std::string seen = text(
        "SELECT string_agg(DISTINCT coalesce(from_status, 'none') || '>' || to_status || ':' || actor_kind, ' ' "
        "ORDER BY coalesce(from_status, 'none') || '>' || to_status || ':' || actor_kind) FROM idem.transitions");
    QCOMPARE(QString::fromStdString(seen),
             QStringLiteral("FAILED>PROCESSING:system PROCESSING>FAILED:operator PROCESSING>FAILED:system "
                            "PROCESSING>SUCCESS:operator PROCESSING>SUCCESS:system PROCESSING>UNKNOWN:system "
                            "UNKNOWN>FAILED:operator UNKNOWN>FAILED:system UNKNOWN>SUCCESS:operator "
                            "UNKNOWN>SUCCESS:system none>PROCESSING:system"));
    // Versions are consecutive per record and match the history.
    QCOMPARE(count("SELECT count(*) FROM idem.records r WHERE version <> (SELECT max(version) FROM idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"), 0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.records r WHERE version <> (SELECT count(*) FROM idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"), 0LL);
    QCOMPARE(text("SELECT evidence::text FROM idem.transitions WHERE idempotency_key='e' AND actor_kind='operator'"), std::string(R"({"ref": null})"));
    QCOMPARE(text("SELECT reason FROM idem.transitions WHERE idempotency_key='d' AND actor_kind='operator'"), std::string("statement shows charge"));
  }

  // Every transition outside the table is refused by the functions with a result code.
  void refusedTransitionsThroughFunctions() {
    client_->begin(request("s", "os"));
    QVERIFY(client_->complete("s", 1, "{}").ok());
    const std::string before = recordRow("s");
    ChangeResult r = client_->complete("s", 2, "{}");
    QCOMPARE(r.result, ResultCode::InvalidTransition);
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    QCOMPARE(client_->fail("s", 2, "x").result, ResultCode::InvalidTransition);
    QCOMPARE(client_->markUnknown("s", 2, "x").result, ResultCode::InvalidTransition);
    QCOMPARE(client_->settle("s", 2, RecordStatus::Failed, "reason", std::nullopt).result, ResultCode::InvalidTransition);
    QCOMPARE(recordRow("s"), before);

    client_->begin(request("f", "of"));
    QVERIFY(client_->fail("f", 1, "x").ok());
    QCOMPARE(client_->complete("f", 2, "{}").result, ResultCode::InvalidTransition);
    QCOMPARE(client_->markUnknown("f", 2, "x").result, ResultCode::InvalidTransition);
    QCOMPARE(client_->settle("f", 2, RecordStatus::Success, "reason", std::nullopt).result, ResultCode::InvalidTransition);

    client_->begin(request("u", "ou"));
    QVERIFY(client_->markUnknown("u", 1, "timeout").ok());
    QCOMPARE(client_->markUnknown("u", 2, "again").result, ResultCode::InvalidTransition);

    QCOMPARE(client_->complete("nope", 1, "{}").result, ResultCode::NotFound);
    QVERIFY(!client_->complete("nope", 1, "{}").version.has_value());
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key='s'"), 2LL);
  }

  void staleVersionIsAConflictAndChangesNothing() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "timeout").ok());
    const std::string before = recordRow("k1");
    const ChangeResult r = client_->settle("k1", 1, RecordStatus::Success, "stale view", std::nullopt);
    QCOMPARE(r.result, ResultCode::Conflict);
    QCOMPARE(r.status, std::optional(RecordStatus::Unknown));
    QCOMPARE(r.version, std::optional(2));
    QCOMPARE(client_->complete("k1", 7, "{}").result, ResultCode::Conflict);
    QCOMPARE(recordRow("k1"), before);
  }

  // Direct UPDATEs (as the owner, who has the rights) meet the same trigger.
  void directUpdatesOutsideTheTableAreRefused() {
    client_->begin(request("s", "os"));
    QVERIFY(client_->complete("s", 1, "{}").ok());
    client_->begin(request("f", "of"));
    QVERIFY(client_->fail("f", 1, "x").ok());
    client_->begin(request("u", "ou"));
    QVERIFY(client_->markUnknown("u", 1, "x").ok());
    client_->begin(request("p", "op"));

    const char* refused[][2] = {
        {"s", "PROCESSING"}, {"s", "FAILED"}, {"s", "UNKNOWN"},
        {"f", "SUCCESS"},    {"f", "UNKNOWN"},
        {"u", "PROCESSING"},
    };
    for (const auto& [key, to] : refused) {
      const std::string before = recordRow(key);
      std::string message;
      const int cls = sqlstateOf([&] {
        translatingErrors("update", [&] {
          pqxx::nontransaction tx(*conn_);
          tx.exec(std::string("UPDATE idem.records SET status = '") + to + "' WHERE idempotency_key = '" + key + "'");
        });
      }, &message);
      QVERIFY2(cls == 23000, (std::string(key) + " -> " + to + " was not refused").c_str());
      QVERIFY2(message.find("is not a transition the state machine allows") != std::string::npos, message.c_str());
      QCOMPARE(recordRow(key), before);
    }
    // Not a status at all: the CHECK constraint names it.
    std::string message;
    QCOMPARE(sqlstateOf([&] { translatingErrors("update", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("UPDATE idem.records SET status = 'DONE' WHERE idempotency_key = 'p'"); }); }, &message), 23000);
    QVERIFY2(message.find("record_status_valid") != std::string::npos, message.c_str());
    // Identity columns never change.
    QCOMPARE(sqlstateOf([&] { translatingErrors("update", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("UPDATE idem.records SET biz_id = 'other' WHERE idempotency_key = 'p'"); }); }), 23000);
    // A record is never born anything but PROCESSING.
    QCOMPARE(sqlstateOf([&] { translatingErrors("insert", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status) VALUES ('x', 'payment', 'ox', 'pay', 'h', 'SUCCESS')"); }); }), 23000);
    // History is append-only.
    QCOMPARE(sqlstateOf([&] { translatingErrors("update", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("UPDATE idem.transitions SET reason = 'rewritten'"); }); }), 23000);
    QCOMPARE(sqlstateOf([&] { translatingErrors("update", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("UPDATE idem.attempts SET outcome = 'executed'"); }); }), 23000);
  }

  // An allowed direct UPDATE still leaves history, and says it bypassed the functions.
  void directAllowedUpdateLeavesHistory() {
    client_->begin(request("p", "op"));
    {
      pqxx::nontransaction tx(*conn_);
      tx.exec("UPDATE idem.records SET status = 'FAILED', version = 99 WHERE idempotency_key = 'p'");
    }
    QCOMPARE(count("SELECT version FROM idem.records WHERE idempotency_key='p'"), 2LL);
    QCOMPARE(text("SELECT reason FROM idem.transitions WHERE idempotency_key='p' AND to_status='FAILED'"),
             std::string("direct UPDATE outside the protocol functions"));
  }

  void onlyOneSuccessPerBusinessObject() {
    // Even the owner cannot make two keys succeed for one business object.
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->complete("k1", 1, "{}").ok());
    const int cls = sqlstateOf([&] { translatingErrors("insert", [&] {
      pqxx::nontransaction tx(*conn_);
      tx.exec("INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, lease_expires_at) VALUES ('k2', 'payment', 'o1', 'pay', 'h', 'PROCESSING', now())"); }); });
    QCOMPARE(cls, 23000);
    QCOMPARE(count("SELECT count(*) FROM pg_indexes WHERE indexname='records_one_success_per_biz' AND indexdef LIKE '%WHERE ((status)::text = ''SUCCESS''::text)%'"), 1LL);
  }

  void badInputGivesClearErrorsAndChangesNothing() {
    client_->begin(request("k1", "o1"));
    const long long attempts = count("SELECT count(*) FROM idem.attempts");
    const long long transitions = count("SELECT count(*) FROM idem.transitions");
    std::string message;

    QCOMPARE(sqlstateOf([&] { client_->begin(request(std::string(256, 'k'), "o2")); }, &message), 22000);
    QVERIFY2(message.find("1 to 255 characters, got 256") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf([&] { client_->begin(request("", "o2")); }, &message), 22000);
    QCOMPARE(client_->begin(request(std::string(255, 'k'), "o255")).outcome, Outcome::Executed);

    QCOMPARE(sqlstateOf([&] {
      pqxx::nontransaction tx(*conn_);
      translatingErrors("begin", [&] { tx.exec("SELECT * FROM idem.begin('k9', 'payment', 'o9', 'pay', NULL, 'cron', '{}')"); });
    }, &message), 22000);
    QVERIFY2(message.find("unknown trigger_source 'cron'") != std::string::npos, message.c_str());

    QCOMPARE(sqlstateOf([&] { client_->settle("k1", 1, RecordStatus::Success, "   ", std::nullopt); }, &message), 22000);
    QVERIFY2(message.find("settle needs a reason") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf([&] { client_->settle("k1", 1, RecordStatus::Processing, "why", std::nullopt); }, &message), 22000);
    QVERIFY2(message.find("SUCCESS or FAILED") != std::string::npos, message.c_str());

    FundFlowInput flow{"payment", "o1", FundFlowKind::Debit, 100, "cny", "gw-1", std::nullopt};
    QCOMPARE(sqlstateOf([&] { client_->recordFundFlow(flow); }, &message), 22000);
    QVERIFY2(message.find("three capital letters") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf([&] {
      pqxx::nontransaction tx(*conn_);
      translatingErrors("record_fund_flow", [&] { tx.exec("SELECT * FROM idem.record_fund_flow('payment', 'o1', 'CHARGEBACK', 1, 'CNY', 'gw-2')"); });
    }, &message), 22000);
    QVERIFY2(message.find("unknown fund flow kind 'CHARGEBACK'") != std::string::npos, message.c_str());
    QCOMPARE(sqlstateOf([&] { client_->begin([&] { auto r = request("k5", "o5"); r.lease = std::chrono::milliseconds(0); return r; }()); }, &message), 22000);
    QCOMPARE(sqlstateOf([&] { client_->begin([&] { auto r = request("k6", " "); return r; }()); }, &message), 22000);

    QCOMPARE(count("SELECT count(*) FROM idem.attempts"), attempts + 1);  // only the 255-char key
    QCOMPARE(count("SELECT count(*) FROM idem.transitions"), transitions + 1);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), 0LL);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key='k1'"), std::string("PROCESSING"));
  }

  void fundFlowsMarkDuplicatesAndIgnoreReingestion() {
    FundFlowResult first = client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k1"});
    QVERIFY(!first.isDuplicate);
    QVERIFY(!first.alreadyRecorded);
    FundFlowResult again = client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k1"});
    QCOMPARE(again.flowId, first.flowId);
    QVERIFY(again.alreadyRecorded);
    FundFlowResult dup = client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-2", "k1"});
    QVERIFY(dup.isDuplicate);
    QCOMPARE(count("SELECT duplicate_of FROM idem.fund_flows WHERE external_ref='gw-2'"), (long long)first.flowId);
    FundFlowResult dup2 = client_->recordFundFlow({"payment", "o1", FundFlowKind::Debit, 2990, "CNY", "gw-3", std::nullopt});
    QCOMPARE(count("SELECT duplicate_of FROM idem.fund_flows WHERE external_ref='gw-3'"), (long long)first.flowId);
    QVERIFY(dup2.isDuplicate);
    // Another kind or another object is a first of its own.
    QVERIFY(!client_->recordFundFlow({"payment", "o1", FundFlowKind::Refund, 2990, "CNY", "gw-4", std::nullopt}).isDuplicate);
    QVERIFY(!client_->recordFundFlow({"payment", "o2", FundFlowKind::Debit, 2990, "CNY", "gw-5", std::nullopt}).isDuplicate);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), 5LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"), 2LL);
  }

  void settleSuccessStoresAReplayableResponse() {
    client_->begin(request("k1", "o1"));
    QVERIFY(client_->markUnknown("k1", 1, "timeout").ok());
    QVERIFY(client_->settle("k1", 2, RecordStatus::Success, "gateway statement line 42", R"({"gateway_ref": "gw-9"})").ok());
    const BeginResult r = client_->begin(request("k1", "o1", TriggerSource::Callback));
    QCOMPARE(r.outcome, Outcome::Replayed);
    QVERIFY(r.responsePayload && r.responsePayload->find("gateway statement line 42") != std::string::npos);
    // The operator's identity does not leak into later statements of the session.
    client_->begin(request("k2", "o2"));
    QVERIFY(client_->complete("k2", 1, "{}").ok());
    QCOMPARE(text("SELECT actor_kind FROM idem.transitions WHERE idempotency_key='k2' AND to_status='SUCCESS'"), std::string("system"));
  }

  void purgeRemovesOnlyOldTerminalRows() {
    client_->begin(request("old", "o1"));
    QVERIFY(client_->complete("old", 1, "{}").ok());
    client_->begin(request("stuck", "o2"));
    client_->begin(request("new", "o3"));
    QVERIFY(client_->complete("new", 1, "{}").ok());
    db_->exec("ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
              "UPDATE idem.records SET updated_at = now() - interval '40 days' WHERE idempotency_key IN ('old', 'stuck'); "
              "ALTER TABLE idem.records ENABLE TRIGGER records_guard; "
              "ALTER TABLE idem.attempts DISABLE TRIGGER attempts_append_only; "
              "UPDATE idem.attempts SET created_at = now() - interval '40 days' WHERE idempotency_key = 'old'; "
              "ALTER TABLE idem.attempts ENABLE TRIGGER attempts_append_only;");
    QCOMPARE(text("SELECT (p)::text FROM idem.purge(interval '30 days') p"), std::string("(1,1,0)"));
    QCOMPARE(count("SELECT count(*) FROM idem.records"), 2LL);  // stuck PROCESSING is never purged
  }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "tst_protocol.moc"

// Every business type's side effect, not only a charge, and a ledger only the claimant and the
// gateway's side may write (schema contract v3), each played with the logins a deployment gives:
// an agent (idem_writer), the gateway's webhook (idem_ledger), an operator, the reconciler.
//   * A refund whose REFUND is in the ledger is never declared FAILED, nor run again; reconcile
//     settles it. A payout's CREDIT likewise; an undeclared type reads every movement cautiously;
//     a coupon leaves no ledger line, and the settle path says that the ledger cannot tell.
//   * A writer records a flow only under a key whose claim token it holds, for its own business
//     object and of its own kind; it cannot forge the evidence that would settle another agent's
//     record, nor a REFUND that would make a charge look given back.
//   * A decision that rests on the absence of a flow and a flow in flight take turns: the decision
//     sees the flow (or, at REPEATABLE READ and SERIALIZABLE, fails and changes nothing).
//   * Retention racing a retry at any isolation level answers retired or rejected, never executed.
#include <QtTest>
#include <future>
#include <thread>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "idem/record_queries.hpp"
#include "idem/settlement.hpp"
#include "login_session.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

using As = test::LoginSession;

BeginRequest requestOf(const std::string& bizType, const std::string& key, const std::string& bizId,
                       std::chrono::milliseconds lease = std::chrono::seconds(30)) {
  BeginRequest r = test::payRequest(key, bizId, bizType, lease);
  r.tool = bizType == "payment" ? "pay" : bizType;
  r.requestPayload = R"({"amount_minor": 2990, "currency": "CNY"})";
  return r;
}

// The SQLSTATE a call ends with, empty when it succeeds.
template <typename Call>
std::string sqlstateOfCall(Call&& call) {
  try {
    call();
    return "";
  } catch (const DatabaseError& e) {
    return e.sqlstate();
  }
}

bool atReadCommitted() {
  return test::TestDatabase::isolationLevel() == "read committed";
}

}  // namespace

class TestSideEffects : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::string agent_, other_, gateway_, operator_, reconciler_;

  long long count(const std::string& sql) { return db_->scalar(sql); }
  long long executions(const std::string& key) {
    return count("SELECT count(*) FROM idem.attempts WHERE idempotency_key = '" + key +
                 "' AND outcome = 'executed'");
  }
  std::string statusOf(const std::string& key) {
    As admin(*db_, "postgres");
    return admin.firstField("SELECT status FROM idem.records WHERE idempotency_key = '" + key +
                            "'");
  }
  // The agent claims `key`, its downstream acts, and its answer is lost: UNKNOWN at version 2.
  Claim claimThenLoseTheAnswer(ProtocolClient& agent, const std::string& bizType,
                               const std::string& key, const std::string& bizId) {
    const BeginResult b = agent.begin(requestOf(bizType, key, bizId));
    if (b.outcome != Outcome::Executed || !b.claimToken) {
      qFatal("%s was not executed", key.c_str());
    }
    const ChangeResult u = agent.markUnknown(key, 1, "no answer within 5s", *b.claimToken);
    if (!u.ok()) qFatal("mark_unknown %s: %s", key.c_str(), std::string(format(u.result)).c_str());
    return {key, 2, *b.claimToken};
  }

  // A refund claimed and carried out, its answer lost (UNKNOWN at version 2), and its REFUND
  // reported by the gateway's webhook under its key: the case the review saw settled FAILED.
  std::string refundWithItsRefundRecorded(const std::string& id) {
    As agent(*db_, agent_);
    As webhook(*db_, gateway_);
    const std::string key = id + ":refund:1";
    claimThenLoseTheAnswer(agent.client, "refund", key, id);
    webhook.client.recordFundFlow(
        {"refund", id, FundFlowKind::Refund, 2990, "CNY", "gw-" + id, key});
    return key;
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_side_effects");
    agent_ = db_->createLoginRole("agent", "idem_writer");
    other_ = db_->createLoginRole("other_agent", "idem_writer");
    gateway_ = db_->createLoginRole("webhook", "idem_ledger");
    operator_ = db_->createLoginRole("olga", "idem_operator");
    reconciler_ = db_->createLoginRole("recon", "idem_reconciler");
  }
  void cleanupTestCase() { db_.reset(); }

  // The review's refund: claimed, its REFUND recorded under its key, the agent marks it UNKNOWN, an
  // operator settles FAILED on "nothing moved", the restarted agent's begin executes it again.
  void aRefundWhoseRefundIsRecordedIsNeverSettledFailedNorRunAgain() {
    As agent(*db_, agent_);
    As olga(*db_, operator_);
    const std::string key = refundWithItsRefundRecorded("run1-ref-85");
    // Through the checked path, as idemctl settle and the admin app send it...
    const SettleOutcome s = settleRecord(
        olga.connection, {key, 2, RecordStatus::Failed, "gateway shows nothing", std::nullopt});
    QCOMPARE(s.verdict, SettleVerdict(ResultCode::SideEffectRecorded));
    QVERIFY2(s.message.find("side_effect_recorded") != std::string::npos, s.message.c_str());
    QVERIFY(s.assessment.sideEffectRecorded);
    QCOMPARE(s.assessment.effectKinds, std::vector<FundFlowKind>{FundFlowKind::Refund});
    // ...and as psql sends it.
    QCOMPARE(olga.firstField("SELECT result FROM idem.settle('" + key +
                             "', 2, 'FAILED', 'gateway shows nothing')"),
             std::string("side_effect_recorded"));
    QCOMPARE(statusOf(key), std::string("UNKNOWN"));
    QCOMPARE(agent.client.begin(requestOf("refund", key, "run1-ref-85")).outcome,
             Outcome::InProgress);
    QCOMPARE(executions(key), 1LL);
    // What the ledger proves, the reconciler settles.
    QVERIFY(As(*db_, reconciler_).client.reconcile() >= 1);
    QCOMPARE(statusOf(key), std::string("SUCCESS"));
  }

  // A FAILED refund record (the claimant said it never left) whose REFUND the gateway later
  // reports is not claimed again: the refund happened.
  void aFailedRefundWhoseRefundIsRecordedIsNotClaimedAgain() {
    As agent(*db_, agent_);
    As webhook(*db_, gateway_);
    const std::string key = "run2-ref-1:refund:1";
    const BeginResult b = agent.client.begin(requestOf("refund", key, "run2-ref-1"));
    QVERIFY(agent.client.fail(key, 1, "connection refused", *b.claimToken, true).ok());
    webhook.client.recordFundFlow(
        {"refund", "run2-ref-1", FundFlowKind::Refund, 2990, "CNY", "gw-ref-1", key});
    const BeginResult again = agent.client.begin(requestOf("refund", key, "run2-ref-1"));
    QCOMPARE(again.outcome, Outcome::Rejected);
    QVERIFY(!again.claimToken);
    QCOMPARE(executions(key), 1LL);
    // The guard holds for a direct UPDATE too (the owner's own session).
    QCOMPARE(test::sqlstateOf(*db_->connect(),
                              "UPDATE idem.records SET status = 'PROCESSING' WHERE "
                              "idempotency_key = '" +
                                  key + "'"),
             std::string("23514"));
  }

  // A payout's CREDIT is its side effect; a payment's REFUND gives its charge back; an undeclared
  // type reads every movement as its side effect.
  void eachBusinessTypesOwnFlowsProveItsSideEffect() {
    As agent(*db_, agent_);
    As webhook(*db_, gateway_);
    As olga(*db_, operator_);
    struct Case {
      std::string bizType;
      FundFlowKind kind;
      bool recorded;
    };
    const Case cases[] = {
        {"payout", FundFlowKind::Credit, true},
        {"payout", FundFlowKind::Refund, false},  // not a payout's side effect: nothing proven
        {"payment", FundFlowKind::Capture, true},
        {"payment", FundFlowKind::Freeze, false},   // a hold proves nothing
        {"gift_card", FundFlowKind::Refund, true},  // undeclared: read cautiously
        {"gift_card", FundFlowKind::Credit, true},
    };
    int n = 0;
    for (const Case& c : cases) {
      const std::string id = "run3-" + c.bizType + "-" + std::to_string(++n);
      const std::string key = id + ":1";
      claimThenLoseTheAnswer(agent.client, c.bizType, key, id);
      webhook.client.recordFundFlow(
          {c.bizType, id, c.kind, 1000, "CNY", "gw-" + id, std::optional<std::string>()});
      const ChangeResult s =
          olga.client.settle(key, 2, RecordStatus::Failed, "gateway shows nothing", std::nullopt);
      QCOMPARE(s.result, c.recorded ? ResultCode::SideEffectRecorded : ResultCode::Ok);
    }
    // A payment refunded in full gave its charge back: FAILED is the operator's to declare.
    claimThenLoseTheAnswer(agent.client, "payment", "run3-paid-back:1", "run3-paid-back");
    webhook.client.recordFundFlow(
        {"payment", "run3-paid-back", FundFlowKind::Debit, 1000, "CNY", "gw-pb-1", std::nullopt});
    webhook.client.recordFundFlow(
        {"payment", "run3-paid-back", FundFlowKind::Refund, 1000, "CNY", "gw-pb-2", std::nullopt});
    QCOMPARE(olga.client
                 .settle("run3-paid-back:1", 2, RecordStatus::Failed, "charged and refunded",
                         std::nullopt)
                 .result,
             ResultCode::Ok);
  }

  // A coupon leaves no line in the ledger: the settle path says so, and FAILED is the operator's
  // own word; reconcile never settles one.
  void aCouponsSideEffectIsOneTheLedgerCannotTell() {
    As agent(*db_, agent_);
    As olga(*db_, operator_);
    const std::string key = "run4-cpn-1:issue_coupon:1";
    claimThenLoseTheAnswer(agent.client, "coupon", key, "run4-cpn-1");
    const SettleAssessment a = assessSettle(olga.connection, key, RecordStatus::Failed);
    QVERIFY(!a.ledgerCanTell);
    QVERIFY(!a.sideEffectRecorded);
    QVERIFY(a.effectKinds.empty());
    QVERIFY(!a.blocking);
    bool said = false;
    for (const std::string& w : a.warnings) {
      said = said || w.find("the ledger cannot tell whether this coupon happened") == 0;
    }
    QVERIFY2(said, a.warnings.empty() ? "no warning" : a.warnings.front().c_str());
    As(*db_, reconciler_).client.reconcile();
    QCOMPARE(statusOf(key), std::string("UNKNOWN"));
    const SettleOutcome s = settleRecord(
        olga.connection,
        {key, 2, RecordStatus::Failed, "the coupon system shows no coupon", std::nullopt});
    QCOMPARE(s.verdict, SettleVerdict(ResultCode::Ok));
    QCOMPARE(statusOf(key), std::string("FAILED"));
  }

  // What proves a type's side effect is data the schema's owner extends, checked, and nobody
  // else's to change.
  void theOwnerDeclaresWhatProvesABusinessTypesSideEffect() {
    db_->exec(
        "SELECT idem.declare_business_type('run5_voucher', ARRAY['CREDIT'], '{}', 'a voucher paid "
        "out as a credit')");
    QCOMPARE(count("SELECT count(*) FROM idem.business_types WHERE biz_type = 'run5_voucher' AND "
                   "effect_kinds = ARRAY['CREDIT'] AND declared_by = current_user"),
             1LL);
    As olga(*db_, operator_);
    As agent(*db_, agent_);
    for (As* who : {&olga, &agent}) {
      QCOMPARE(who->sqlstateOf("SELECT idem.declare_business_type('payment', '{}', '{}', 'x')"),
               std::string("42501"));
      QCOMPARE(who->sqlstateOf("UPDATE idem.business_types SET effect_kinds = '{}'"),
               std::string("42501"));
    }
    QCOMPARE(olga.firstField("SELECT effect_kinds::text FROM idem.business_types WHERE biz_type "
                             "= 'refund'"),
             std::string("{REFUND}"));
    auto connection = db_->connect();
    for (const char* bad :
         {"SELECT idem.declare_business_type('x y', '{DEBIT}', '{}', 'spaces')",
          "SELECT idem.declare_business_type('x', '{FREEZE}', '{}', 'a hold proves nothing')",
          "SELECT idem.declare_business_type('x', '{DEBIT}', '{DEBIT}', 'both ways')",
          "SELECT idem.declare_business_type('x', '{}', '{REFUND}', 'reverses nothing')",
          "SELECT idem.declare_business_type('x', '{DEBIT}', '{}', '  ')"}) {
      QCOMPARE(test::sqlstateOf(*connection, bad), std::string("22023"));
    }
  }

  // Every program reads a flow's role from the database (idem.side_effect_role, through
  // fundFlowsOf): a type declared at run time counts as declared, with no list of kinds in C++.
  void aFlowsRoleIsItsBusinessTypesDeclaration() {
    db_->exec(
        "SELECT idem.declare_business_type('role_topup', ARRAY['CREDIT'], ARRAY['DEBIT'], 'a "
        "wallet top-up paid out as a credit, taken back by a debit')");
    As webhook(*db_, gateway_);
    const std::vector<std::pair<std::string, FundFlowKind>> lines{
        {"role_topup", FundFlowKind::Credit}, {"role_topup", FundFlowKind::Debit},
        {"role_topup", FundFlowKind::Freeze}, {"payment", FundFlowKind::Credit},
        {"payment", FundFlowKind::Capture},   {"role_undeclared", FundFlowKind::Credit}};
    for (std::size_t i = 0; i < lines.size(); ++i) {
      webhook.client.recordFundFlow({lines[i].first, "role-obj", lines[i].second, 100, "CNY",
                                     "role-ref-" + std::to_string(i), std::nullopt});
    }
    As reader(*db_, db_->createLoginRole("role_reader", "idem_reader"));
    auto roleOf = [&](const std::string& bizType, FundFlowKind kind) {
      pqxx::read_transaction tx(reader.connection);
      for (const FundFlow& f : fundFlowsOf(tx, bizType, "role-obj")) {
        if (f.kind == kind) return std::string(format(f.role));
      }
      return std::string("<no flow>");
    };
    QCOMPARE(roleOf("role_topup", FundFlowKind::Credit), std::string("effect"));
    QCOMPARE(roleOf("role_topup", FundFlowKind::Debit), std::string("reversal"));
    QCOMPARE(roleOf("role_topup", FundFlowKind::Freeze), std::string("none"));
    QCOMPARE(roleOf("payment", FundFlowKind::Credit), std::string("none"));
    QCOMPARE(roleOf("payment", FundFlowKind::Capture), std::string("effect"));
    // An undeclared type is read cautiously: any movement proves its side effect.
    QCOMPARE(roleOf("role_undeclared", FundFlowKind::Credit), std::string("effect"));
  }

  // The operator's explicit override still settles FAILED, and the transition's evidence records
  // who overrode which side effect.
  void theOverrideOfARecordedSideEffectIsRecordedInTheEvidence() {
    As olga(*db_, operator_);
    const std::string key = refundWithItsRefundRecorded("run6-ref-1");
    SettleRequest r{
        key,          2,   RecordStatus::Failed, "gateway support: the refund was reversed (#881)",
        std::nullopt, true};
    QCOMPARE(settleRecord(olga.connection, r).verdict, SettleVerdict(ResultCode::Ok));
    QCOMPARE(olga.firstField("SELECT evidence->'override_money_moved'->'side_effect'->>'biz_type' "
                             "FROM idem.transitions WHERE idempotency_key = '" +
                             key + "' AND to_status = 'FAILED'"),
             std::string("refund"));
    // An override set for the operator's own session does not reach the trigger: only settle's
    // explicit argument overrides.
    const std::string other = refundWithItsRefundRecorded("run6-ref-2");
    pqxx::nontransaction tx(olga.connection);
    tx.exec("SET idem.override_money_moved = 'on'");
    QCOMPARE(tx.exec("SELECT result FROM idem.settle('" + other +
                     "', 2, 'FAILED', 'a session setting is no override')")[0][0]
                 .as<std::string>(),
             std::string("side_effect_recorded"));
    tx.exec("RESET idem.override_money_moved");
  }

  // The claimant reports its own side effect with its token; the gateway's webhook through its own
  // role; every flow says which of the two recorded it.
  void eachFlowSaysWhoRecordedIt() {
    As agent(*db_, agent_);
    As webhook(*db_, gateway_);
    const BeginResult b = agent.client.begin(requestOf("payment", "run7-pay-1:1", "run7-pay-1"));
    const FundFlowResult own =
        agent.client.recordFundFlow({"payment", "run7-pay-1", FundFlowKind::Debit, 2990, "CNY",
                                     "gw-run7-1", std::string("run7-pay-1:1")},
                                    *b.claimToken);
    const FundFlowResult callback = webhook.client.recordFundFlow(
        {"payment", "run7-pay-1", FundFlowKind::Debit, 2990, "CNY", "gw-run7-1", "run7-pay-1:1"});
    QVERIFY(callback.alreadyRecorded);  // the same line twice: nothing new
    QCOMPARE(callback.flowId, own.flowId);
    webhook.client.recordFundFlow(
        {"payment", "run7-pay-1", FundFlowKind::Refund, 2990, "CNY", "gw-run7-2", std::nullopt});
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'run7-pay-1' AND "
                   "((kind = 'DEBIT' AND recorded_by = 'claimant' AND recorded_login = '" +
                   agent_ +
                   "') OR (kind = 'REFUND' AND recorded_by = 'ledger' AND "
                   "recorded_login = '" +
                   gateway_ + "'))"),
             2LL);
  }

  // A writer without the claim token forged a one-cent DEBIT naming another agent's UNKNOWN key,
  // and reconcile settled that record SUCCESS on it; a made-up REFUND made "money moved" false.
  void aWriterCannotForgeTheEvidenceThatDecides() {
    As victim(*db_, agent_);
    As forger(*db_, other_);
    const std::string key = "run8-pay-1:1";
    const Claim c = claimThenLoseTheAnswer(victim.client, "payment", key, "run8-pay-1");
    const BeginResult own = forger.client.begin(requestOf("payment", "run8-own:1", "run8-own"));
    const FundFlowInput forged{"payment",  "run8-pay-1", FundFlowKind::Debit, 1, "CNY",
                               "forged-1", key};
    // As the gateway: not its role.
    QCOMPARE(sqlstateOfCall([&] { forger.client.recordFundFlow(forged); }), std::string("42501"));
    // As a claimant: with no token, a made-up one, its own claim's token.
    for (const std::string& token :
         {std::string(), std::string("8e0f2c7a-0000-4000-8000-1"),
          std::string("00000000-0000-4000-8000-000000000000"), *own.claimToken}) {
      const std::string state =
          sqlstateOfCall([&] { forger.client.recordFundFlow(forged, token); });
      QVERIFY2(state == "42501" || state == "22P02", state.c_str());
    }
    // Nothing was written, and nothing settles the victim's record.
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'run8-pay-1'"), 0LL);
    As(*db_, reconciler_).client.reconcile();
    QCOMPARE(statusOf(key), std::string("UNKNOWN"));
    // A claimant reports only its own object and its own kind of side effect: no REFUND that
    // would make its own charge look given back, no flow for another object.
    const BeginResult pay = victim.client.begin(requestOf("payment", "run8-pay-2:1", "run8-pay-2"));
    QCOMPARE(sqlstateOfCall([&] {
               victim.client.recordFundFlow({"payment", "run8-pay-2", FundFlowKind::Refund, 2990,
                                             "CNY", "made-up-refund", std::string("run8-pay-2:1")},
                                            *pay.claimToken);
             }),
             std::string("22023"));
    QCOMPARE(sqlstateOfCall([&] {
               victim.client.recordFundFlow({"payment", "run8-elsewhere", FundFlowKind::Debit, 1,
                                             "CNY", "elsewhere", std::string("run8-pay-2:1")},
                                            *pay.claimToken);
             }),
             std::string("22023"));
    // The victim's own late report with its token is the claimant's word, and settles it.
    victim.client.recordFundFlow(
        {"payment", "run8-pay-1", FundFlowKind::Debit, 2990, "CNY", "gw-run8-1", key}, c.token);
    QVERIFY(As(*db_, reconciler_).client.reconcile() >= 1);
    QCOMPARE(statusOf(key), std::string("SUCCESS"));
  }

  // A settle to FAILED and a flow of the same business object in flight take turns: the settle
  // waits for the flow's transaction and then sees it. At REPEATABLE READ and SERIALIZABLE, whose
  // snapshot cannot see it, the statement fails with 40001 and changes nothing; the client runs it
  // again in a new transaction, as those levels ask, and gets the same answer.
  void aDecisionWaitsForAFlowInFlightAndSeesIt() {
    As agent(*db_, agent_);
    for (const bool raw : {false, true}) {
      const std::string id = std::string("run9-ref-") + (raw ? "raw" : "client");
      const std::string key = id + ":refund:1";
      claimThenLoseTheAnswer(agent.client, "refund", key, id);
      pqxx::connection gateway(db_->dsnAs(gateway_));
      pqxx::work flow(gateway);
      flow.exec("SELECT * FROM idem.record_fund_flow('refund', '" + id +
                "', 'REFUND', 2990, 'CNY', 'gw-" + id + "', '" + key + "')");
      auto decision = std::async(std::launch::async, [&]() -> std::string {
        pqxx::connection c(db_->dsnAs(operator_));
        if (raw) {  // as psql sends it: one statement, one transaction
          return test::sqlstateOf(
              c, "SELECT idem.settle('" + key + "', 2, 'FAILED', 'nothing in the ledger')");
        }
        return std::string(
            format(ProtocolClient(c)
                       .settle(key, 2, RecordStatus::Failed, "nothing in the ledger", std::nullopt)
                       .result));
      });
      QVERIFY2(decision.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout,
               "the settle did not wait for the flow in flight");
      flow.commit();
      const std::string answer = decision.get();
      if (raw) {
        QCOMPARE(answer, std::string(atReadCommitted() ? "" : "40001"));
      } else {
        QCOMPARE(answer, std::string("side_effect_recorded"));
      }
      QCOMPARE(statusOf(key), std::string("UNKNOWN"));
    }
  }

  // Retention removes a paid record while a retry of its key, and a new key for its order, wait on
  // the rows it deletes. At READ COMMITTED they read the tombstones; at REPEATABLE READ and
  // SERIALIZABLE their snapshot cannot, and begin recognises the rows it removed: retired and
  // rejected, never executed.
  void retentionRacingARetryNeverRunsThePaidKeyAgain() {
    As agent(*db_, agent_);
    const std::string key = "run10-pay-1:1";
    const BeginResult b = agent.client.begin(requestOf("payment", key, "run10-pay-1"));
    QVERIFY(agent.client.complete(key, 1, R"({"gateway_ref": "gw-10"})", *b.claimToken).ok());
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; UPDATE idem.records SET "
        "updated_at = now() - interval '2 days' WHERE biz_id = 'run10-pay-1'; ALTER TABLE "
        "idem.records ENABLE TRIGGER records_guard");
    auto owner = db_->connect();
    pqxx::work purge(*owner);
    QCOMPARE(purge.exec1("SELECT records_deleted FROM idem.purge('1 day')")[0].as<long long>(),
             1LL);
    auto retry = std::async(std::launch::async, [&] {
      pqxx::connection c(db_->dsnAs(agent_));
      return ProtocolClient(c).begin(requestOf("payment", key, "run10-pay-1"));
    });
    auto freshKey = std::async(std::launch::async, [&] {
      pqxx::connection c(db_->dsnAs(agent_));
      return ProtocolClient(c).begin(requestOf("payment", "run10-pay-1:2", "run10-pay-1"));
    });
    QTest::qWait(300);  // both wait on the rows the purge deleted
    purge.commit();
    const BeginResult r = retry.get();
    const BeginResult f = freshKey.get();
    QCOMPARE(r.outcome, Outcome::Retired);
    QCOMPARE(r.status, std::optional(RecordStatus::Success));
    QCOMPARE(f.outcome, Outcome::Rejected);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE biz_id = 'run10-pay-1'"), 0LL);
    // The first claim's attempt, and no other execution.
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE biz_id = 'run10-pay-1' AND outcome "
                   "= 'executed'"),
             1LL);
  }

  // Many agents race to claim a FAILED refund (its claimant said it never left) while the gateway
  // reports that it happened after all: at most one claims it, before the REFUND is in; once it
  // is, nobody does. At REPEATABLE READ and SERIALIZABLE a racer may fail with 40001 instead, as
  // the level asks of its clients.
  void racersOnAFailedRefundNeverClaimItOnceItsRefundIsIn() {
    for (int round = 0; round < 5; ++round) {
      As agent(*db_, agent_);
      const std::string id = "run11-ref-" + std::to_string(round);
      const std::string key = id + ":refund:1";
      const BeginResult b = agent.client.begin(requestOf("refund", key, id));
      QVERIFY(agent.client.fail(key, 1, "connection refused", *b.claimToken, true).ok());
      std::atomic<bool> go{false};
      std::vector<std::future<std::optional<Outcome>>> racers;
      for (int i = 0; i < 8; ++i) {
        racers.push_back(std::async(std::launch::async, [&]() -> std::optional<Outcome> {
          pqxx::connection c(db_->dsnAs(agent_));
          while (!go.load()) std::this_thread::yield();
          try {
            return ProtocolClient(c).begin(requestOf("refund", key, id)).outcome;
          } catch (const DatabaseError& e) {
            if (e.sqlstate() != "40001") throw;
            return std::nullopt;
          }
        }));
      }
      auto webhook = std::async(std::launch::async, [&] {
        pqxx::connection c(db_->dsnAs(gateway_));
        while (!go.load()) std::this_thread::yield();
        ProtocolClient(c).recordFundFlow(
            {"refund", id, FundFlowKind::Refund, 2990, "CNY", "gw-" + id, key});
      });
      go.store(true);
      int executed = 0;
      for (auto& r : racers) {
        const std::optional<Outcome> o = r.get();
        if (o == Outcome::Executed) ++executed;
        QVERIFY(!o || *o == Outcome::Executed || *o == Outcome::InProgress ||
                *o == Outcome::Rejected);
      }
      webhook.get();
      QVERIFY(executed <= 1);
      QCOMPARE(executions(key), 1LL + executed);
      // After the flow, nobody claims it.
      QCOMPARE(agent.client.begin(requestOf("refund", key, id)).outcome,
               executed == 1 ? Outcome::InProgress : Outcome::Rejected);
    }
  }
};

QTEST_GUILESS_MAIN(TestSideEffects)
#include "tst_side_effects.moc"

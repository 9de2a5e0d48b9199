// The checked settle path shared by the admin app and `idemctl settle` (schema contract v2):
// input is validated before anything is sent; the server decides and every refusal comes back as
// a verdict with one sentence (money_moved with the flows, lease_active with when the lease ends,
// conflict with what changed and by whom, invalid_transition); money moved is the server's rule
// (idem.money_position), not a count of DEBIT rows; and of two operators racing on one record
// exactly one wins.
#include <QtTest>
#include <barrier>
#include <thread>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "idem/settlement.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

class TestSettlement : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;

  // A claimed record: PROCESSING (with the given lease), or UNKNOWN (version 2) after a timeout.
  Claim stuck(const std::string& key, const std::string& bizId, bool unknown,
              const std::string& bizType = "payment",
              std::chrono::milliseconds lease = std::chrono::milliseconds(30'000)) {
    ProtocolClient c(*conn_);
    const BeginRequest r = test::payRequest(key, bizId, bizType, lease);
    const BeginResult begun = c.begin(r);
    Claim claim{key, begun.version.value_or(0), begun.claimToken.value_or("")};
    if (unknown) {
      const ChangeResult u = c.markUnknown(key, 1, "response timeout", claim.token);
      if (u.ok()) claim.version = *u.version;
    }
    return claim;
  }
  void flow(const std::string& bizId, FundFlowKind kind, const std::string& ref,
            std::int64_t amount = 2990, const std::string& currency = "CNY",
            const std::string& bizType = "payment") {
    ProtocolClient(*conn_).recordFundFlow(
        {bizType, bizId, kind, amount, currency, ref, std::nullopt});
  }
  void debit(const std::string& bizId, const std::string& ref) {
    flow(bizId, FundFlowKind::Debit, ref);
  }
  long long transitions(const std::string& key) {
    return db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = '" + key +
                       "'");
  }
  static bool says(const std::string& text, const char* what) {
    return text.find(what) != std::string::npos;
  }
  static bool anySays(const std::vector<std::string>& texts, const char* what) {
    return std::any_of(texts.begin(), texts.end(),
                       [&](const std::string& t) { return says(t, what); });
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_settlement"); }
  void init() {
    db_->reset();
    conn_ = db_->connect();
  }
  void cleanup() { conn_.reset(); }

  void blankReasonIsRefusedBeforeTheDatabase() {
    stuck("k1", "o1", true);
    for (const std::string reason : {"", "   ", "\t\n"}) {
      SettleRequest req{"k1", 2, RecordStatus::Success, reason, std::nullopt, false};
      const SettleOutcome out = settleRecord(*conn_, req);
      QCOMPARE(out.verdict, kSettleInputRefused);
      QVERIFY2(says(out.message, "reason is required"), out.message.c_str());
    }
    QCOMPARE(transitions("k1"), 2LL);
  }

  void aReasonWithNothingVisibleIsRefusedByTheServerAsInput() {
    stuck("k1", "o1", true);
    // Zero-width spaces and a byte-order mark: not blank to a whitespace test, empty to a reader.
    const std::string invisible = "\u200b\u200b\ufeff";
    const SettleOutcome out =
        settleRecord(*conn_, {"k1", 2, RecordStatus::Success, invisible, std::nullopt, false});
    QCOMPARE(out.verdict, kSettleInputRefused);
    QVERIFY2(says(out.message, "refused by the server"), out.message.c_str());
    QVERIFY2(says(out.message, "nothing was written"), out.message.c_str());
    QCOMPARE(transitions("k1"), 2LL);
  }

  void badInputIsNamed() {
    stuck("k1", "o1", true);
    QCOMPARE(settleRecord(*conn_, {"k1", 2, RecordStatus::Processing, "why", std::nullopt, false})
                 .verdict,
             kSettleInputRefused);
    const SettleOutcome notJson =
        settleRecord(*conn_, {"k1", 2, RecordStatus::Success, "why", "{gateway_ref: x", false});
    QCOMPARE(notJson.verdict, kSettleInputRefused);
    QVERIFY(says(notJson.message, "not valid JSON"));
    const SettleOutcome missing =
        settleRecord(*conn_, {"nope", 1, RecordStatus::Success, "why", std::nullopt, false});
    QCOMPARE(missing.verdict, SettleVerdict(ResultCode::NotFound));
    QVERIFY(says(missing.message, "'nope'"));
    QCOMPARE(transitions("k1"), 2LL);
  }

  void failedWhileMoneyMovedIsRefusedByTheServerWithTheFlows() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    SettleRequest req{"k1", 2, RecordStatus::Failed, "gateway shows nothing", std::nullopt, false};
    const SettleAssessment seen = assessSettle(*conn_, "k1", RecordStatus::Failed);
    QVERIFY(seen.sideEffectRecorded);
    QVERIFY(seen.blocking);
    QVERIFY2(says(seen.warnings.front(), "the ledger records the side effect of payment/o1"),
             seen.warnings[0].c_str());
    const SettleOutcome refused = settleRecord(*conn_, req);
    QCOMPARE(refused.verdict, SettleVerdict(ResultCode::SideEffectRecorded));
    QCOMPARE(refused.change.result,
             ResultCode::SideEffectRecorded);  // the server's answer, not ours
    QVERIFY2(says(refused.message, "side_effect_recorded"), refused.message.c_str());
    QVERIFY2(says(refused.message, "DEBIT 2990 CNY (gw-1)"), refused.message.c_str());
    QCOMPARE(transitions("k1"), 2LL);
    QCOMPARE(db_->scalar("SELECT version FROM idem.records WHERE idempotency_key = 'k1'"), 2LL);
  }

  void overrideOfMoneyMovedNeedsAReasonAndIsRecordedInTheEvidence() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    SettleRequest req{"k1", 2, RecordStatus::Failed, " \t", std::nullopt, true};
    QCOMPARE(settleRecord(*conn_, req).verdict, kSettleInputRefused);
    QCOMPARE(transitions("k1"), 2LL);
    req.reason = "gateway case 991: the DEBIT was reversed before settlement";
    const SettleAssessment seen = assessSettle(*conn_, "k1", RecordStatus::Failed, true);
    QVERIFY(!seen.blocking);  // overridden: still said, no longer blocking
    QVERIFY(anySays(seen.warnings, "overridden"));
    const SettleOutcome out = settleRecord(*conn_, req);
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::Ok));
    QVERIFY2(says(out.message, "override"), out.message.c_str());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'k1' AND "
                         "to_status = 'FAILED' AND actor_kind = 'operator' AND "
                         "evidence ? 'override_money_moved'"),
             1LL);
  }

  // FREEZE + CAPTURE moved money although no DEBIT exists (version 1 counted DEBIT only).
  void captureAfterFreezeIsMoneyMovedAndAFreezeAloneIsNot() {
    stuck("k1", "o1", true);
    flow("o1", FundFlowKind::Freeze, "gw-hold-1");
    const SettleAssessment held = assessSettle(*conn_, "k1", RecordStatus::Failed);
    QVERIFY(!held.sideEffectRecorded);
    QVERIFY(!held.blocking);
    flow("o1", FundFlowKind::Capture, "gw-cap-1");
    const SettleOutcome out =
        settleRecord(*conn_, {"k1", 2, RecordStatus::Failed, "no charge?", std::nullopt, false});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::SideEffectRecorded));
    QVERIFY2(says(out.message, "CAPTURE 2990 CNY (gw-cap-1)"), out.message.c_str());

    stuck("k2", "o2", true);
    flow("o2", FundFlowKind::Freeze, "gw-hold-2");
    QCOMPARE(settleRecord(*conn_, {"k2", 2, RecordStatus::Failed, "hold released, never captured",
                                   std::nullopt, false})
                 .verdict,
             SettleVerdict(ResultCode::Ok));
  }

  // The C++ side follows the server's view whatever the flows: a refunded charge moved nothing,
  // a CREDIT does not offset a DEBIT, and flows in two currencies count as money moved.
  void moneyMovedIsTheServersRule() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    flow("o1", FundFlowKind::Refund, "gw-r1");
    QVERIFY(!assessSettle(*conn_, "k1", RecordStatus::Failed).sideEffectRecorded);
    stuck("k2", "o2", true);
    debit("o2", "gw-2");
    flow("o2", FundFlowKind::Credit, "gw-c2");
    QVERIFY(assessSettle(*conn_, "k2", RecordStatus::Failed).sideEffectRecorded);
    stuck("k3", "o3", true);
    debit("o3", "gw-3");
    flow("o3", FundFlowKind::Refund, "gw-r3", 2990, "EUR");
    QVERIFY(assessSettle(*conn_, "k3", RecordStatus::Failed).sideEffectRecorded);
    for (const char* key : {"k1", "k2", "k3"}) {
      QCOMPARE(db_->scalar(std::string("SELECT (SELECT coalesce(m.money_moved, false) FROM "
                                       "idem.records r LEFT JOIN idem.money_position m USING "
                                       "(biz_type, biz_id) WHERE r.idempotency_key = '") +
                           key + "')::int"),
               assessSettle(*conn_, key, RecordStatus::Failed).sideEffectRecorded ? 1LL : 0LL);
    }
  }

  void liveLeaseIsRefusedWithWhenItEnds() {
    const Claim claim = stuck("k1", "o1", false, "payment", std::chrono::minutes(10));
    const SettleAssessment seen = assessSettle(*conn_, "k1", RecordStatus::Failed);
    QVERIFY(seen.leaseActive);
    QVERIFY(seen.blocking);
    QVERIFY(seen.leaseRemaining && *seen.leaseRemaining > std::chrono::minutes(5));
    QVERIFY2(anySays(seen.warnings, "its claimant may still answer"), seen.warnings[0].c_str());
    const SettleOutcome out = settleRecord(
        *conn_, {"k1", 1, RecordStatus::Failed, "agent looks dead", std::nullopt, false});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::LeaseActive));
    QVERIFY2(says(out.message, "lease_active"), out.message.c_str());
    QVERIFY2(says(out.message, "the lease ends at "), out.message.c_str());
    QVERIFY2(says(out.message, " UTC, in "), out.message.c_str());
    const std::string ends = pqxx::nontransaction(*conn_)
                                 .exec1(
                                     "SELECT to_char(lease_expires_at AT TIME ZONE 'UTC', "
                                     "'YYYY-MM-DD HH24:MI:SS') FROM idem.records")[0]
                                 .c_str();
    QVERIFY2(says(out.message, ends.c_str()), (out.message + " / " + ends).c_str());
    QCOMPARE(transitions("k1"), 1LL);
    // The claimant was about to answer, and still can.
    QVERIFY(ProtocolClient(*conn_).complete("k1", claim.version, "{}", claim.token).ok());
  }

  void expiredLeaseIsSettledAndFailedMayRunAgain() {
    stuck("k1", "o1", false, "payment", std::chrono::milliseconds(1));
    QTest::qWait(20);  // the lease is over: the claimant died
    const SettleOutcome out = settleRecord(
        *conn_, {"k1", 1, RecordStatus::Failed, "gateway has no trace", std::nullopt, false});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::Ok));
    QCOMPARE(db_->scalar("SELECT retry_allowed::int FROM idem.records"), 1LL);
    BeginRequest r;
    r.key = "k1";
    r.bizType = "payment";
    r.bizId = "o1";
    r.tool = "pay";
    QCOMPARE(ProtocolClient(*conn_).begin(r).outcome, Outcome::Executed);
  }

  void successWithoutMoneyMovedWarnsButSettlesWhateverTheBusinessType() {
    for (const std::string bizType : {"payment", "subscription.renewal"}) {
      const std::string key = "k-" + bizType;
      stuck(key, "o1", true, bizType);
      const SettleAssessment a = assessSettle(*conn_, key, RecordStatus::Success);
      QVERIFY(!a.blocking);
      QCOMPARE(a.warnings.size(), std::size_t(1));
      QVERIFY2(says(a.warnings[0], "shows that it happened"), a.warnings[0].c_str());
      QVERIFY(says(a.warnings[0], (bizType + "/o1").c_str()));
      const SettleOutcome out = settleRecord(
          *conn_,
          {key, 2, RecordStatus::Success, "statement line 7", R"({"gateway_ref": "gw-7"})", false});
      QCOMPARE(out.verdict, SettleVerdict(ResultCode::Ok));
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator' AND "
                         "reason = 'statement line 7' AND evidence->>'gateway_ref' = 'gw-7'"),
             2LL);
  }

  void duplicateDebitIsPointedOut() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    debit("o1", "gw-2");
    const SettleAssessment a = assessSettle(*conn_, "k1", RecordStatus::Success);
    QVERIFY(a.duplicateDebit);
    QVERIFY(!a.blocking);
    QVERIFY(a.sideEffectRecorded);
    QVERIFY2(anySays(a.warnings, "charged 2 times for payment/o1: refund the duplicates"),
             a.warnings.front().c_str());
  }

  void failedIsCorrectedToSuccess() {
    const Claim claim = stuck("k1", "o1", false);
    QVERIFY(ProtocolClient(*conn_).fail("k1", 1, "card declined", claim.token, false).ok());
    debit("o1", "gw-late");  // the gateway's statement: it went through after all
    const SettleAssessment a = assessSettle(*conn_, "k1", RecordStatus::Success);
    QVERIFY(a.correction);
    QVERIFY(!a.blocking);
    QVERIFY(anySays(a.warnings, "a correction"));
    const SettleOutcome out =
        settleRecord(*conn_, {"k1", 2, RecordStatus::Success, "statement shows gw-late",
                              R"({"gateway_ref": "gw-late"})", false});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::Ok));
    QVERIFY2(says(out.message, "corrected k1 to SUCCESS"), out.message.c_str());
    // FAILED again is not a settle: the record is FAILED only once.
    const Claim other = stuck("k2", "o2", false);
    QVERIFY(ProtocolClient(*conn_).fail("k2", 1, "card declined", other.token, false).ok());
    const SettleOutcome again =
        settleRecord(*conn_, {"k2", 2, RecordStatus::Failed, "declined", std::nullopt, false});
    QCOMPARE(again.verdict, SettleVerdict(ResultCode::InvalidTransition));
    QVERIFY2(says(again.message, "FAILED already"), again.message.c_str());
  }

  void successIsFinal() {
    const Claim claim = stuck("k1", "o1", false);
    QVERIFY(ProtocolClient(*conn_).complete("k1", 1, "{}", claim.token).ok());
    const SettleAssessment a = assessSettle(*conn_, "k1", RecordStatus::Failed, true);
    QVERIFY(a.blocking);
    const SettleOutcome out = settleRecord(
        *conn_, {"k1", 2, RecordStatus::Failed, "customer complained", std::nullopt, true});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::InvalidTransition));
    QVERIFY2(says(out.message, "SUCCESS, which is final"), out.message.c_str());
    QCOMPARE(transitions("k1"), 2LL);
  }

  void staleVersionShowsWhatChangedAndByWhom() {
    const Claim claim = stuck("k1", "o1", false);  // version 1: the operator looks now
    QVERIFY(
        ProtocolClient(*conn_).markUnknown("k1", 1, "no response from gateway", claim.token).ok());
    const SettleOutcome out =
        settleRecord(*conn_, {"k1", 1, RecordStatus::Success, "paid", std::nullopt, false});
    QCOMPARE(out.verdict, SettleVerdict(ResultCode::Conflict));
    QCOMPARE(out.changesSince.size(), std::size_t(1));
    QCOMPARE(out.changesSince[0].toStatus, RecordStatus::Unknown);
    QCOMPARE(out.changesSince[0].reason, std::optional<std::string>("no response from gateway"));
    QVERIFY2(says(out.message, "no response from gateway"), out.message.c_str());
    QVERIFY2(says(out.message, "changed since version 1"), out.message.c_str());
    QCOMPARE(db_->scalar("SELECT version FROM idem.records WHERE idempotency_key = 'k1'"), 2LL);
  }

  // Every read and the settle run inside translatingErrors: a login without the rights gets one
  // DatabaseError sentence, never a libpqxx exception.
  void missingRightsAreADatabaseError() {
    stuck("k1", "o1", true);
    const std::string writer = db_->createLoginRole("agent", "idem_writer");
    const std::string reader = db_->createLoginRole("viewer", "idem_reader");
    pqxx::connection w(db_->dsnAs(writer)), r(db_->dsnAs(reader));
    const SettleRequest req{"k1", 2, RecordStatus::Success, "paid", std::nullopt, false};
    for (pqxx::connection* c : {&w, &r}) {
      try {
        settleRecord(*c, req);
        QFAIL("settled without the rights");
      } catch (const DatabaseError& e) {
        QCOMPARE(e.sqlstate(), std::string("42501"));
      }
    }
    QCOMPARE(transitions("k1"), 2LL);
  }

  void twoOperatorsRacingOneRecordOneWins() {
    const std::string alice = db_->createLoginRole("alice", "idem_operator");
    const std::string bob = db_->createLoginRole("bob", "idem_operator");
    constexpr int kRecords = 40;
    for (int i = 0; i < kRecords; ++i)
      stuck("k" + std::to_string(i), "o" + std::to_string(i), true);
    pqxx::connection a(db_->dsnAs(alice)), b(db_->dsnAs(bob));
    std::barrier start(2);
    std::atomic<int> settled{0}, conflicts{0};
    auto operatorLoop = [&](pqxx::connection& c, RecordStatus decision) {
      for (int i = 0; i < kRecords; ++i) {
        start.arrive_and_wait();
        const SettleOutcome out = settleRecord(
            c, {"k" + std::to_string(i), 2, decision, "looked at the gateway", std::nullopt, true});
        if (out.verdict == SettleVerdict(ResultCode::Ok)) settled.fetch_add(1);
        if (out.verdict == SettleVerdict(ResultCode::Conflict) && !out.changesSince.empty()) {
          conflicts.fetch_add(1);
        }
      }
    };
    {
      std::jthread ta([&] { operatorLoop(a, RecordStatus::Success); });
      std::jthread tb([&] { operatorLoop(b, RecordStatus::Failed); });
    }
    QCOMPARE(settled.load(), kRecords);
    QCOMPARE(conflicts.load(), kRecords);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator'"),
             (long long)kRecords);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions t JOIN idem.records r USING "
                         "(idempotency_key) WHERE t.actor_kind = 'operator' AND t.to_status = "
                         "r.status AND t.actor IN ('" +
                         alice + "', '" + bob + "')"),
             (long long)kRecords);
  }
};

QTEST_GUILESS_MAIN(TestSettlement)
#include "tst_settlement.moc"

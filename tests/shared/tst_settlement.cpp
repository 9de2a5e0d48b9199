// The checked settle path shared by the admin app and `idemctl settle`: input is validated before
// anything is sent, evidence that contradicts the decision blocks it, a stale view is refused with
// what changed and by whom, and of two operators racing on one record exactly one wins.
#include <QtTest>

#include <barrier>
#include <thread>

#include "idem/protocol_client.hpp"
#include "idem/settlement.hpp"
#include "test_database.hpp"

using namespace idem;

class TestSettlement : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;

  void stuck(const std::string& key, const std::string& bizId, bool unknown) {
    ProtocolClient c(*conn_);
    BeginRequest r;
    r.key = key; r.bizType = "payment"; r.bizId = bizId; r.tool = "pay";
    c.begin(r);
    if (unknown) QVERIFY(c.markUnknown(key, 1, "response timeout").ok());
  }
  void debit(const std::string& bizId, const std::string& ref) {
    ProtocolClient(*conn_).recordFundFlow({"payment", bizId, FundFlowKind::Debit, 2990, "CNY", ref, std::nullopt});
  }
  long long transitions(const std::string& key) {
    return db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = '" + key + "'");
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_settlement"); }
  void init() { db_->reset(); conn_ = db_->connect(); }
  void cleanup() { conn_.reset(); }

  void blankReasonIsRefusedBeforeTheDatabase() {
    stuck("k1", "o1", true);
    for (const std::string reason : {"", "   ", "\t\n"}) {
      SettleRequest req{"k1", 2, RecordStatus::Success, reason, std::nullopt, false};
      const SettleOutcome out = settleRecord(*conn_, req);
      QCOMPARE(out.verdict, SettleVerdict::InvalidInput);
      QVERIFY2(out.message.find("reason is required") != std::string::npos, out.message.c_str());
    }
    QCOMPARE(transitions("k1"), 2LL);
  }

  void badInputIsNamed() {
    stuck("k1", "o1", true);
    QCOMPARE(settleRecord(*conn_, {"k1", 2, RecordStatus::Processing, "why", std::nullopt, false}).verdict, SettleVerdict::InvalidInput);
    const SettleOutcome notJson = settleRecord(*conn_, {"k1", 2, RecordStatus::Success, "why", "{gateway_ref: x", false});
    QCOMPARE(notJson.verdict, SettleVerdict::InvalidInput);
    QVERIFY(notJson.message.find("not valid JSON") != std::string::npos);
    QCOMPARE(settleRecord(*conn_, {"nope", 1, RecordStatus::Success, "why", std::nullopt, false}).verdict, SettleVerdict::NotFound);
    QCOMPARE(transitions("k1"), 2LL);
  }

  void failedWithDebitNeedsOverride() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    SettleRequest req{"k1", 2, RecordStatus::Failed, "gateway shows nothing", std::nullopt, false};
    const SettleOutcome blocked = settleRecord(*conn_, req);
    QCOMPARE(blocked.verdict, SettleVerdict::NeedsOverride);
    QVERIFY(blocked.assessment.blocking);
    QVERIFY2(blocked.message.find("DEBIT") != std::string::npos, blocked.message.c_str());
    QCOMPARE(transitions("k1"), 2LL);
    req.overrideDebitWarning = true;
    QCOMPARE(settleRecord(*conn_, req).verdict, SettleVerdict::Settled);
    QCOMPARE(transitions("k1"), 3LL);
  }

  void successWithoutFlowWarnsButSettles() {
    stuck("k1", "o1", false);
    const SettleAssessment a = assessSettle(*conn_, "k1", RecordStatus::Success);
    QVERIFY(!a.blocking);
    QCOMPARE(a.warnings.size(), std::size_t(1));
    QVERIFY(a.warnings[0].find("no DEBIT flow") != std::string::npos);
    const SettleOutcome out = settleRecord(*conn_, {"k1", 1, RecordStatus::Success, "statement line 7", R"({"gateway_ref": "gw-7"})", false});
    QCOMPARE(out.verdict, SettleVerdict::Settled);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'k1' AND actor_kind = 'operator' AND reason = 'statement line 7' AND evidence->>'gateway_ref' = 'gw-7'"), 1LL);
  }

  void duplicateDebitIsPointedOut() {
    stuck("k1", "o1", true);
    debit("o1", "gw-1");
    debit("o1", "gw-2");
    const SettleAssessment a = assessSettle(*conn_, "k1", RecordStatus::Success);
    QVERIFY(a.duplicateDebit);
    QVERIFY(!a.blocking);
    QVERIFY(a.warnings.front().find("charged 2 times") != std::string::npos);
  }

  void staleVersionShowsWhatChangedAndByWhom() {
    stuck("k1", "o1", false);  // version 1: the operator looks now
    QVERIFY(ProtocolClient(*conn_).markUnknown("k1", 1, "no response from gateway").ok());
    const SettleOutcome out = settleRecord(*conn_, {"k1", 1, RecordStatus::Success, "paid", std::nullopt, false});
    QCOMPARE(out.verdict, SettleVerdict::Conflict);
    QCOMPARE(out.changesSince.size(), std::size_t(1));
    QCOMPARE(out.changesSince[0].toStatus, RecordStatus::Unknown);
    QCOMPARE(out.changesSince[0].reason, std::optional<std::string>("no response from gateway"));
    QVERIFY2(out.message.find("no response from gateway") != std::string::npos, out.message.c_str());
    QCOMPARE(db_->scalar("SELECT version FROM idem.records WHERE idempotency_key = 'k1'"), 2LL);
  }

  void twoOperatorsRacingOneRecordOneWins() {
    const std::string alice = db_->createLoginRole("alice", "idem_operator");
    const std::string bob = db_->createLoginRole("bob", "idem_operator");
    constexpr int kRecords = 40;
    for (int i = 0; i < kRecords; ++i) stuck("k" + std::to_string(i), "o" + std::to_string(i), true);
    pqxx::connection a(db_->dsnAs(alice)), b(db_->dsnAs(bob));
    std::barrier start(2);
    std::atomic<int> settled{0}, conflicts{0};
    auto operatorLoop = [&](pqxx::connection& c, RecordStatus decision) {
      for (int i = 0; i < kRecords; ++i) {
        start.arrive_and_wait();
        const SettleOutcome out = settleRecord(c, {"k" + std::to_string(i), 2, decision, "looked at the gateway", std::nullopt, true});
        if (out.verdict == SettleVerdict::Settled) settled.fetch_add(1);
        if (out.verdict == SettleVerdict::Conflict && !out.changesSince.empty()) conflicts.fetch_add(1);
      }
    };
    {
      std::jthread ta([&] { operatorLoop(a, RecordStatus::Success); });
      std::jthread tb([&] { operatorLoop(b, RecordStatus::Failed); });
    }
    QCOMPARE(settled.load(), kRecords);
    QCOMPARE(conflicts.load(), kRecords);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator'"), (long long)kRecords);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions t JOIN idem.records r USING (idempotency_key) WHERE t.actor_kind = 'operator' AND t.to_status = r.status AND t.actor IN ('" + alice + "', '" + bob + "')"), (long long)kRecords);
  }
};

QTEST_GUILESS_MAIN(TestSettlement)
#include "tst_settlement.moc"

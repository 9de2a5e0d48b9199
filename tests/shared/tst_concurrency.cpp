// "Exactly once" under real concurrency: many connections race on one key, one business object or
// one ledger line, released together by a barrier, round after round.
#include <QtTest>

#include <barrier>
#include <thread>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"

using namespace idem;

namespace {

// Workers with a connection each; run(round) calls fn(worker, round) on all of them at once.
class Racers {
 public:
  Racers(const test::TestDatabase& db, int count) {
    for (int i = 0; i < count; ++i) {
      connections_.push_back(db.connect());
      clients_.push_back(std::make_unique<ProtocolClient>(*connections_.back()));
    }
  }

  template <typename Fn>
  void race(int rounds, Fn fn) {
    const int n = static_cast<int>(clients_.size());
    std::barrier start(n);
    std::vector<std::jthread> threads;
    std::atomic<int> failures{0};
    for (int w = 0; w < n; ++w) {
      threads.emplace_back([&, w] {
        for (int round = 0; round < rounds; ++round) {
          start.arrive_and_wait();
          try {
            fn(*clients_[w], w, round);
          } catch (const std::exception& e) {
            qWarning("racer %d round %d: %s", w, round, e.what());
            failures.fetch_add(1);
          }
        }
      });
    }
    threads.clear();
    QCOMPARE(failures.load(), 0);
  }

 private:
  std::vector<std::unique_ptr<pqxx::connection>> connections_;
  std::vector<std::unique_ptr<ProtocolClient>> clients_;
};

BeginRequest request(const std::string& key, const std::string& bizId) {
  BeginRequest r;
  r.key = key;
  r.bizType = "payment";
  r.bizId = bizId;
  r.tool = "pay";
  r.requestPayload = R"({"amount": 2990})";
  return r;
}

}  // namespace

class TestConcurrency : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_concurrency"); }
  void init() { db_->reset(); }

  // The seeds' test: 20 concurrent requests with one key give exactly one execution, many times.
  void twentyConcurrentBeginsOnOneKeyExecuteOnce() {
    constexpr int kRacers = 20, kKeys = 300;
    std::vector<std::atomic<int>> executed(kKeys);
    Racers racers(*db_, kRacers);
    racers.race(kKeys, [&](ProtocolClient& c, int worker, int round) {
      auto r = request("key-" + std::to_string(round), "order-" + std::to_string(round));
      r.source = worker == 0 ? TriggerSource::Initial : TriggerSource::Http;
      if (c.begin(r).outcome == Outcome::Executed) executed[round].fetch_add(1);
    });
    for (int k = 0; k < kKeys; ++k) QCOMPARE(executed[k].load(), 1);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), (long long)kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts"), (long long)kKeys * kRacers);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"), (long long)kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome NOT IN ('executed', 'in_progress')"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions"), (long long)kKeys);
  }

  // Different keys for one business object (an LLM that invents a key per retry): one runs.
  void concurrentKeysForOneBusinessObjectExecuteOnce() {
    constexpr int kRacers = 12, kObjects = 150;
    std::vector<std::atomic<int>> executed(kObjects);
    Racers racers(*db_, kRacers);
    racers.race(kObjects, [&](ProtocolClient& c, int worker, int round) {
      const auto r = request("obj-" + std::to_string(round) + "-try-" + std::to_string(worker),
                             "order-" + std::to_string(round));
      const Outcome o = c.begin(r).outcome;
      if (o == Outcome::Executed) executed[round].fetch_add(1);
      else if (o != Outcome::Rejected) throw std::runtime_error("unexpected outcome " + std::string(format(o)));
    });
    for (int k = 0; k < kObjects; ++k) QCOMPARE(executed[k].load(), 1);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), (long long)kObjects);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'rejected'"), (long long)kObjects * (kRacers - 1));
  }

  // A FAILED record retried by many callers at once is re-claimed by exactly one.
  void concurrentRetriesOfAFailedRecordReclaimOnce() {
    constexpr int kRacers = 16, kKeys = 100;
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      for (int k = 0; k < kKeys; ++k) {
        c.begin(request("f-" + std::to_string(k), "order-" + std::to_string(k)));
        QVERIFY(c.fail("f-" + std::to_string(k), 1, "declined").ok());
      }
    }
    std::vector<std::atomic<int>> executed(kKeys);
    Racers racers(*db_, kRacers);
    racers.race(kKeys, [&](ProtocolClient& c, int, int round) {
      if (c.begin(request("f-" + std::to_string(round), "order-" + std::to_string(round))).outcome == Outcome::Executed) {
        executed[round].fetch_add(1);
      }
    });
    for (int k = 0; k < kKeys; ++k) QCOMPARE(executed[k].load(), 1);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'PROCESSING' AND version = 3 AND attempt_count = 2"), (long long)kKeys);
  }

  // Concurrent ledger lines for one business object: exactly one is first, the rest point at it;
  // the same line ingested concurrently is stored once.
  void concurrentFundFlowsHaveExactlyOneFirst() {
    constexpr int kRacers = 10, kObjects = 200;
    Racers racers(*db_, kRacers);
    std::atomic<int> firsts{0}, duplicates{0};
    racers.race(kObjects, [&](ProtocolClient& c, int worker, int round) {
      const std::string obj = "order-" + std::to_string(round);
      // Half the racers send distinct references, half re-send the same line.
      const std::string ref = worker % 2 == 0 ? "gw-" + obj + "-" + std::to_string(worker) : "gw-" + obj + "-same";
      const FundFlowResult r = c.recordFundFlow({"payment", obj, FundFlowKind::Debit, 2990, "CNY", ref, std::nullopt});
      if (!r.alreadyRecorded) (r.isDuplicate ? duplicates : firsts).fetch_add(1);
    });
    QCOMPARE(firsts.load(), kObjects);
    QCOMPARE(db_->scalar("SELECT count(*) FROM (SELECT biz_id FROM idem.fund_flows WHERE duplicate_of IS NULL GROUP BY biz_id HAVING count(*) = 1) x"), (long long)kObjects);
    // distinct refs per object: 5 even racers + 1 shared = 6 rows, 5 of them duplicates
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows"), (long long)kObjects * 6);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"), (long long)kObjects * 5);
    QCOMPARE(duplicates.load(), kObjects * 5);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows d JOIN idem.fund_flows f ON f.id = d.duplicate_of WHERE f.duplicate_of IS NOT NULL OR f.biz_id <> d.biz_id"), 0LL);
  }

  // The owner completing, a reconciler failing, the sweeper expiring and an operator settling,
  // all at once on the same records: one change wins per version and history stays exact.
  void racingStateChangesKeepVersionAndHistoryExact() {
    constexpr int kKeys = 200;
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      for (int k = 0; k < kKeys; ++k) {
        auto r = request("r-" + std::to_string(k), "order-" + std::to_string(k));
        r.lease = std::chrono::milliseconds(1);
        c.begin(r);
      }
    }
    QTest::qWait(10);
    std::atomic<int> ok{0};
    Racers racers(*db_, 4);
    racers.race(kKeys, [&](ProtocolClient& c, int worker, int round) {
      const std::string key = "r-" + std::to_string(round);
      ChangeResult r;
      switch (worker) {
        case 0: r = c.complete(key, 1, "{}"); break;
        case 1: r = c.fail(key, 1, "reconciler: no charge"); break;
        case 2: r.result = c.expireLeases() > 0 ? ResultCode::Ok : ResultCode::Conflict; return;
        default: r = c.settle(key, 1, RecordStatus::Success, "operator saw the charge", std::nullopt); break;
      }
      if (r.ok()) ok.fetch_add(1);
    });
    // Each record moved away from version 1 exactly once by the racers other than the sweeper.
    QVERIFY(ok.load() <= kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records r WHERE version <> (SELECT count(*) FROM idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM (SELECT idempotency_key, version FROM idem.transitions GROUP BY 1, 2 HAVING count(*) > 1) x"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'PROCESSING'"), (long long)kKeys);
  }
};

QTEST_GUILESS_MAIN(TestConcurrency)
#include "tst_concurrency.moc"

// "Exactly once" under real concurrency: many connections race on one key, one business object or
// one ledger line, released together by a barrier, round after round; and (schema v2) the
// claimant's answer races the operator's settle and the reconciler, with exactly one winner and
// never a second execution.
#include <QtTest>
#include <barrier>
#include <thread>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

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
  BeginRequest r = test::payRequest(key, bizId);
  r.requestPayload = R"({"amount": 2990})";
  return r;
}

}  // namespace

class TestConcurrency : public QObject {
  Q_OBJECT

  // A statement of the test's own that may deadlock with the claims running beside it.
  void execAgainOnDeadlock(const std::string& sql) {
    for (int round = 1;; ++round) {
      try {
        db_->exec(sql);
        return;
      } catch (const pqxx::deadlock_detected&) {
        if (round == 10) throw;
      }
    }
  }
  std::unique_ptr<test::TestDatabase> db_;

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_concurrency"); }
  void init() { db_->reset(); }

  // The seeds' test: 20 concurrent requests with one key give exactly one execution, and exactly
  // one claim token, many times.
  void twentyConcurrentBeginsOnOneKeyExecuteOnce() {
    constexpr int kRacers = 20, kKeys = 300;
    std::vector<std::atomic<int>> executed(kKeys), tokens(kKeys), mismatched(kKeys);
    Racers racers(*db_, kRacers);
    racers.race(kKeys, [&](ProtocolClient& c, int worker, int round) {
      auto r = request("key-" + std::to_string(round), "order-" + std::to_string(round));
      r.source = worker == 0 ? TriggerSource::Initial : TriggerSource::Http;
      const BeginResult b = c.begin(r);
      if (b.outcome == Outcome::Executed) executed[round].fetch_add(1);
      if (b.claimToken) tokens[round].fetch_add(1);
      if (b.claimToken.has_value() != (b.outcome == Outcome::Executed))
        mismatched[round].fetch_add(1);
    });
    for (int k = 0; k < kKeys; ++k) {
      QCOMPARE(executed[k].load(), 1);
      QCOMPARE(tokens[k].load(), 1);
      QCOMPARE(mismatched[k].load(), 0);
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE claim_token_hash IS NOT NULL"),
             (long long)kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), (long long)kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts"), (long long)kKeys * kRacers);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"),
             (long long)kKeys);
    QCOMPARE(
        db_->scalar(
            "SELECT count(*) FROM idem.attempts WHERE outcome NOT IN ('executed', 'in_progress')"),
        0LL);
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
      if (o == Outcome::Executed)
        executed[round].fetch_add(1);
      else if (o != Outcome::Rejected)
        throw std::runtime_error("unexpected outcome " + std::string(format(o)));
    });
    for (int k = 0; k < kObjects; ++k) QCOMPARE(executed[k].load(), 1);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), (long long)kObjects);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'rejected'"),
             (long long)kObjects * (kRacers - 1));
  }

  // A retryable FAILED record retried by many callers at once is re-claimed by exactly one.
  void concurrentRetriesOfAFailedRecordReclaimOnce() {
    constexpr int kRacers = 16, kKeys = 100;
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      for (int k = 0; k < kKeys; ++k) {
        const BeginResult b =
            c.begin(request("f-" + std::to_string(k), "order-" + std::to_string(k)));
        QVERIFY(
            c.fail("f-" + std::to_string(k), 1, "connection refused", *b.claimToken, true).ok());
      }
    }
    std::vector<std::atomic<int>> executed(kKeys);
    Racers racers(*db_, kRacers);
    racers.race(kKeys, [&](ProtocolClient& c, int, int round) {
      if (c.begin(request("f-" + std::to_string(round), "order-" + std::to_string(round)))
              .outcome == Outcome::Executed) {
        executed[round].fetch_add(1);
      }
    });
    for (int k = 0; k < kKeys; ++k) QCOMPARE(executed[k].load(), 1);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'PROCESSING' AND "
                         "version = 3 AND attempt_count = 2"),
             (long long)kKeys);
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
      const std::string ref =
          worker % 2 == 0 ? "gw-" + obj + "-" + std::to_string(worker) : "gw-" + obj + "-same";
      const FundFlowResult r =
          c.recordFundFlow({"payment", obj, FundFlowKind::Debit, 2990, "CNY", ref, std::nullopt});
      if (!r.alreadyRecorded) (r.isDuplicate ? duplicates : firsts).fetch_add(1);
    });
    QCOMPARE(firsts.load(), kObjects);
    QCOMPARE(db_->scalar("SELECT count(*) FROM (SELECT biz_id FROM idem.fund_flows WHERE "
                         "duplicate_of IS NULL GROUP BY biz_id HAVING count(*) = 1) x"),
             (long long)kObjects);
    // distinct refs per object: 5 even racers + 1 shared = 6 rows, 5 of them duplicates
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows"), (long long)kObjects * 6);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"),
             (long long)kObjects * 5);
    QCOMPARE(duplicates.load(), kObjects * 5);
    // A duplicate points at its object's first flow, never at another duplicate.
    db_->expectNone(
        {"SELECT count(*) FROM idem.fund_flows d JOIN idem.fund_flows f ON f.id = "
         "d.duplicate_of WHERE f.duplicate_of IS NOT NULL OR f.biz_id <> d.biz_id"});
  }

  // The claimant completing, a reconciler resolving FAILED, the sweeper expiring and an operator
  // settling, all at once on the same records past their lease: one change wins per version and
  // history stays exact.
  void racingStateChangesKeepVersionAndHistoryExact() {
    constexpr int kKeys = 200;
    std::vector<std::string> tokens = claimExpired("r-", kKeys);
    std::atomic<int> ok{0};
    Racers racers(*db_, 4);
    racers.race(kKeys, [&](ProtocolClient& c, int worker, int round) {
      const std::string key = "r-" + std::to_string(round);
      ChangeResult r;
      switch (worker) {
        case 0:
          r = c.complete(key, 1, "{}", tokens[round]);
          break;
        case 1:
          r = c.resolve(key, 1, RecordStatus::Failed, "reconciler: no charge",
                        R"({"lookup": "none"})");
          break;
        case 2:
          c.expireLeases();
          return;
        default:
          r = c.settle(key, 1, RecordStatus::Success, "operator saw the charge", std::nullopt);
          break;
      }
      if (r.ok()) ok.fetch_add(1);
    });
    QVERIFY(ok.load() <= kKeys);
    db_->expectNone(
        {"SELECT count(*) FROM idem.records r WHERE version <> (SELECT count(*) FROM "
         "idem.transitions t WHERE t.idempotency_key = r.idempotency_key)",
         "SELECT count(*) FROM (SELECT idempotency_key, version FROM idem.transitions "
         "GROUP BY 1, 2 HAVING count(*) > 1) x"});
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'PROCESSING'"),
             (long long)kKeys);
  }

  // After the lease expired, the operator settles FAILED while the claimant's late complete
  // arrives and the agent retries: exactly one of the two answers wins. Where the gateway already
  // reported the charge (even rounds), the operator is refused (money_moved) and nothing runs
  // twice. Where it did not (odd rounds), a retry runs only if the operator's FAILED committed
  // first: the side effect did not happen, on the operator's word; never after a SUCCESS.
  void operatorSettleRacingClaimantCompleteHasOneWinner() {
    constexpr int kKeys = 200;
    std::vector<std::string> tokens = claimExpired("s-", kKeys);
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      for (int k = 0; k < kKeys; k += 2) {
        c.recordFundFlow({"payment", "order-" + std::to_string(k), FundFlowKind::Debit, 2990, "CNY",
                          "gw-s-" + std::to_string(k), "s-" + std::to_string(k)});
      }
    }
    std::vector<std::atomic<int>> wins(kKeys), executed(kKeys);
    std::atomic<int> operatorWins{0}, claimantWins{0};
    Racers racers(*db_, 3);
    racers.race(kKeys, [&](ProtocolClient& c, int worker, int round) {
      const std::string key = "s-" + std::to_string(round);
      if (worker == 0) {
        if (c.complete(key, 1, R"({"charged": true})", tokens[round]).ok()) {
          wins[round].fetch_add(1);
          claimantWins.fetch_add(1);
        }
      } else if (worker == 1) {
        if (c.settle(key, 1, RecordStatus::Failed, "gateway shows nothing", std::nullopt).ok()) {
          wins[round].fetch_add(1);
          operatorWins.fetch_add(1);
        }
      } else {
        // The agent's retry, racing both: never executed while the outcome is undecided or SUCCESS.
        const BeginResult b = c.begin(request(key, "order-" + std::to_string(round)));
        if (b.outcome == Outcome::Executed) executed[round].fetch_add(1);
      }
    });
    for (int k = 0; k < kKeys; ++k) QCOMPARE(wins[k].load(), 1);
    QCOMPARE(operatorWins.load() + claimantWins.load(), kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'PROCESSING'"),
             (long long)kKeys);
    // A retry executed only where the operator's FAILED had committed first, never where money
    // moved.
    for (int k = 0; k < kKeys; ++k) {
      if (k % 2 == 0) {
        QCOMPARE(executed[k].load(), 0);
        QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE idempotency_key = 's-" +
                             std::to_string(k) + "' AND status = 'SUCCESS' AND version = 2"),
                 1LL);
      }
      if (executed[k].load() == 0) continue;
      QCOMPARE(executed[k].load(), 1);
      QCOMPARE(
          db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 's-" +
                      std::to_string(k) +
                      "' AND version = 2 AND actor_kind = 'operator' AND to_status = 'FAILED'"),
          1LL);
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE to_status = 'SUCCESS' AND "
                         "actor_kind = 'system'"),
             (long long)claimantWins.load());
    db_->expectNone(
        {"SELECT count(*) FROM (SELECT idempotency_key FROM idem.transitions WHERE "
         "to_status = 'SUCCESS' GROUP BY 1 HAVING count(*) > 1) x"});
  }

  // reconcile (several at once) racing the claimant's late complete: exactly one winner per record.
  void reconcileRacingCompleteHasOneWinner() {
    constexpr int kKeys = 200;
    std::vector<std::string> tokens = claimExpired("c-", kKeys);
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      QCOMPARE(c.expireLeases(), kKeys);
      for (int k = 0; k < kKeys; ++k) {
        c.recordFundFlow({"payment", "order-" + std::to_string(k), FundFlowKind::Debit, 2990, "CNY",
                          "gw-c-" + std::to_string(k), "c-" + std::to_string(k)});
      }
    }
    std::atomic<int> completed{0}, reconciled{0};
    Racers racers(*db_, 4);
    racers.race(kKeys / 10, [&](ProtocolClient& c, int worker, int round) {
      if (worker == 0) {
        for (int k = round * 10; k < round * 10 + 10; ++k) {
          if (c.complete("c-" + std::to_string(k), 2, R"({"late": true})", tokens[k]).ok())
            completed.fetch_add(1);
        }
      } else {
        reconciled.fetch_add(c.reconcile());
      }
    });
    QCOMPARE(completed.load() + reconciled.load(), kKeys);
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS' AND version = 3"),
        (long long)kKeys);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE to_status = 'SUCCESS' AND "
                         "actor_kind = 'reconciler'"),
             (long long)reconciled.load());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE to_status = 'SUCCESS'"),
             (long long)kKeys);
  }

  // Retention racing late retries of the keys it removes, and new keys for their paid objects:
  // whichever commits first, a retry is replayed (record still there), retired (tombstone) or
  // rejected, never executed again.
  void purgeRacingLateRetriesNeverRunsAKeyAgain() {
    purgeRacingLateRetries([](ProtocolClient& c, std::chrono::hours age) { c.purge(age); });
  }

  // The same with retention in batches of three records, each its own transaction (as idemctl
  // purge runs it), then the history in one more.
  void purgeInBatchesRacingLateRetriesNeverRunsAKeyAgain() {
    purgeRacingLateRetries([](ProtocolClient& c, std::chrono::hours age) {
      std::optional<std::string> from;
      for (;;) {
        const PurgeResult r = c.purgeRecords(age, 3, from);
        if (r.records < 3) break;
        from = r.nextFrom;
      }
      c.purgeHistory(age);
    });
  }

  // Retention dropping whole days of history while claims go on: every claim completes, its own
  // history (today's) is whole, and the history an open record keeps in a dropped day survives
  // with its ids.
  void purgeDroppingDaysOfHistoryWhileClaimsGoOn() {
    constexpr int kWriters = 4, kRounds = 3, kOldRows = 3000;
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      QCOMPARE(c.begin(request("open", "order-open")).outcome, Outcome::Executed);
    }
    // The old days' partitions, made before the writers start (as prepare_history_partitions
    // makes days ahead of their writers).
    db_->makeHistoryDays(39 + kRounds, 40);
    std::atomic<bool> done{false};
    std::atomic<int> completed{0}, failed{0};
    std::vector<std::thread> writers;
    // Whatever this test does next, the writers stop and are joined before it returns.
    struct Stop {
      std::atomic<bool>& done;
      std::vector<std::thread>& writers;
      ~Stop() {
        done.store(true);
        for (auto& t : writers)
          if (t.joinable()) t.join();
      }
    } stop{done, writers};
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        auto conn = db_->connect();
        ProtocolClient c(*conn);
        for (int i = 0; !done.load(); ++i) {
          const std::string key = "w" + std::to_string(w) + "-" + std::to_string(i);
          try {
            // At SERIALIZABLE, with every writer waiting behind a partition's drop and then
            // committing at once, a call can fail to serialize more times than the client's own
            // retries; it changed nothing, and a client runs it again, as this one does.
            const auto again = [](auto&& call) {
              for (int round = 1;; ++round) {
                try {
                  return call();
                } catch (const DatabaseError& e) {
                  if (e.kind() != DatabaseErrorKind::Serialization || round == 20) throw;
                }
              }
            };
            const BeginResult r = again([&] { return c.begin(request(key, "order-" + key)); });
            if (r.outcome == Outcome::Executed &&
                again([&] { return c.complete(key, 1, "{}", *r.claimToken); }).ok())
              completed.fetch_add(1);
            else
              failed.fetch_add(1);
          } catch (const std::exception& e) {
            qWarning("%s: %s", key.c_str(), e.what());
            failed.fetch_add(1);
          }
        }
      });
    }
    const auto openIds = [&] {
      auto conn = db_->connect();
      pqxx::nontransaction tx(*conn);
      return std::string(tx.exec1("SELECT string_agg(id::text, ' ' ORDER BY id) FROM "
                                  "idem.attempts WHERE idempotency_key = 'open'")[0]
                             .c_str());
    };
    std::string kept;
    long long dropped = 0;
    for (int round = 0; round < kRounds; ++round) {
      const std::string back = std::to_string(42 - round);  // one day a round, oldest first
      // That day's history: rows of keys retention has removed, and the open record's first.
      // Switching the tables' triggers can deadlock with a claim in flight (each takes the two
      // tables in its own order): the loser is rolled back whole and runs again.
      execAgainOnDeadlock(
          "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, "
          "outcome, request_hash, created_at) SELECT 'gone-' || g, 'payment', 'o-' || g, 'pay', "
          "'initial', 'executed', 'h', now() - interval '" +
          back +
          " days' "
          "FROM generate_series(1, " +
          std::to_string(kOldRows) +
          ") g; "
          "ALTER TABLE idem.attempts DISABLE TRIGGER attempts_append_only; "
          "UPDATE idem.attempts SET created_at = now() - interval '" +
          back +
          " days' "
          "WHERE idempotency_key = 'open' AND created_at > now() - interval '1 day'; "
          "ALTER TABLE idem.attempts ENABLE TRIGGER attempts_append_only; "
          "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
          "UPDATE idem.records SET created_at = now() - interval '" +
          back +
          " days' "
          "WHERE idempotency_key = 'open' AND created_at > now() - interval '1 day'; "
          "ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
      if (round == 0) kept = openIds();
      QTest::qWait(200);
      pqxx::connection conn(db_->dsn());
      // Past that day and no later one.
      dropped += ProtocolClient(conn).purge(std::chrono::hours(24 * (41 - round))).attempts;
      // Dropped whole: the day's partition is gone, and none of its rows went to the DEFAULT one.
      QCOMPARE(db_->scalar("SELECT count(*) FROM pg_class WHERE relname = 'attempts_p' || "
                           "to_char((now() AT TIME ZONE 'UTC')::date - " +
                           back + ", 'YYYYMMDD')"),
               0LL);
      QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts_outside WHERE idempotency_key "
                           "LIKE 'gone-%'"),
               0LL);
    }
    QTest::qWait(200);
    done.store(true);
    for (auto& t : writers) t.join();

    QCOMPARE(failed.load(), 0);
    QVERIFY(completed.load() > 0);
    QCOMPARE(dropped, (long long)kRounds * kOldRows);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key LIKE 'gone-%'"),
             0LL);
    // Every claim's record, its one attempt and its two transitions.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS'"),
             (long long)completed.load());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key LIKE 'w%'"),
             (long long)completed.load());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key LIKE 'w%'"),
             2LL * completed.load());
    QCOMPARE(openIds(), kept);
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM pg_class WHERE relname ~ '^(attempts|transitions)_p' "
                    "AND idem.history_partition_end(relname) < now() - interval '30 days'"),
        0LL);
  }

 private:
  // Retention (`purge`, given a client and an age) racing late retries: see
  // purgeRacingLateRetriesNeverRunsAKeyAgain.
  template <typename Purge>
  void purgeRacingLateRetries(Purge purge) {
    constexpr int kBatches = 20, kPerBatch = 10;
    {
      auto conn = db_->connect();
      ProtocolClient c(*conn);
      for (int b = 0; b < kBatches; ++b) {
        for (int k = 0; k < kPerBatch; ++k) {
          const std::string key = "p-" + std::to_string(b) + "-" + std::to_string(k);
          const BeginResult r = c.begin(request(key, "order-" + key));
          QVERIFY(c.complete(key, 1, "{}", *r.claimToken).ok());
        }
      }
    }
    // Batch b is 40 + b days old: round r removes batch kBatches - 1 - r.
    db_->exec(
        "ALTER TABLE idem.records DISABLE TRIGGER records_guard; "
        "UPDATE idem.records SET updated_at = now() - (40 + split_part(idempotency_key, '-', "
        "2)::int) * interval '1 day'; "
        "ALTER TABLE idem.records ENABLE TRIGGER records_guard;");
    std::atomic<int> executed{0}, unexpected{0};
    Racers racers(*db_, 6);
    racers.race(kBatches, [&](ProtocolClient& c, int worker, int round) {
      const int batch = kBatches - 1 - round;
      if (worker == 0) {
        pqxx::connection conn(db_->dsn());
        ProtocolClient purger(conn);
        purge(purger, std::chrono::hours(24 * (39 + batch) + 12));
        return;
      }
      for (int k = 0; k < kPerBatch; ++k) {
        const std::string key = "p-" + std::to_string(batch) + "-" + std::to_string(k);
        const std::string sameOrNew =
            worker % 2 == 0 ? key : key + "-new-" + std::to_string(worker);
        BeginRequest r = request(sameOrNew, "order-" + key);
        r.source = TriggerSource::Llm;
        const Outcome o = c.begin(r).outcome;
        if (o == Outcome::Executed) executed.fetch_add(1);
        if (o != Outcome::Replayed && o != Outcome::Retired && o != Outcome::Rejected)
          unexpected.fetch_add(1);
      }
    });
    QCOMPARE(executed.load(), 0);
    QCOMPARE(unexpected.load(), 0);
    // A batch skips a record a racer held; the next purge finds it.
    {
      pqxx::connection conn(db_->dsn());
      ProtocolClient purger(conn);
      purge(purger, std::chrono::hours(24 * 39 + 12));
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.retired_keys WHERE status = 'SUCCESS'"),
             (long long)kBatches * kPerBatch);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed' AND "
                         "idempotency_key LIKE '%-new-%'"),
             0LL);
  }

  // kKeys records claimed with a lease that has ended; their claim tokens.
  std::vector<std::string> claimExpired(const std::string& prefix, int keys) {
    std::vector<std::string> tokens;
    auto conn = db_->connect();
    ProtocolClient c(*conn);
    for (int k = 0; k < keys; ++k) {
      auto r = request(prefix + std::to_string(k), "order-" + std::to_string(k));
      r.lease = std::chrono::milliseconds(1);
      tokens.push_back(c.begin(r).claimToken.value());
    }
    QTest::qWait(10);
    return tokens;
  }
};

QTEST_GUILESS_MAIN(TestConcurrency)
#include "tst_concurrency.moc"

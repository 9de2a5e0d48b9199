// The simulator's traffic against a real database (schema contract v3): the seeds' fault test (drop
// 20% of successful responses, clients retry with the same key from every source: charges : orders
// stays exactly 1 : 1), also with an operator settling stuck records and reconcile running during
// the run; careless clients trying every hole v2 closes, each refused, with no extra charge; a
// re-run after retention answered `retired`; the buggy downstream showing up as duplicate fund
// flows, every case of the product produced, and the same seed planning the same traffic.
#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <thread>

#include "idem/database_error.hpp"
#include "plan.hpp"
#include "simulator.hpp"
#include "test_database.hpp"
#include "test_traffic.hpp"

using namespace idem;

class TestSimulator : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::atomic<bool> stop_{false};

  static sim::SimulationConfig quietConfig(const test::TestDatabase& db) {
    sim::SimulationConfig c = test::testTraffic(db, 42, "t", 600);
    // Every fault and every retry off: each test turns on what it is about.
    using C = sim::SimulationConfig;
    for (double C::*rate :
         {&C::responseLossRate, &C::crashRate, &C::declineRate, &C::refusedRate, &C::carelessRate,
          &C::llmRetryRate, &C::frameworkRetryRate, &C::httpRetryRate, &C::callbackRate,
          &C::mismatchRate, &C::newKeyRate, &C::concurrentDuplicateRate, &C::doubleChargeRate}) {
      c.*rate = 0;
    }
    return c;
  }

  // The seeds' fault test: 1000 payments; the proxy drops 20% of successful responses and clients
  // retry with the same key, from every layer.
  static sim::SimulationConfig faultTestConfig(const test::TestDatabase& db) {
    sim::SimulationConfig c = quietConfig(db);
    c.bizTypes = {"payment"};
    c.operations = 1000;
    c.responseLossRate = 0.2;
    c.httpRetryRate = 0.5;
    c.llmRetryRate = c.frameworkRetryRate = c.callbackRate = 0.3;
    c.concurrentDuplicateRate = 0.1;
    c.callbackResolvesUnknownRate = 0.5;
    return c;
  }

  // What the fault tests pin down: `orders` orders, each executed once and charged once (one DEBIT
  // per order, 1 : 1 exactly), as many charges as the agents counted.
  void expectOneChargePerOrder(const sim::SimulationSummary& s, long long orders) {
    QCOMPARE(db_->scalar("SELECT count(DISTINCT biz_id) FROM idem.records"), orders);
    const long long charges =
        db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'");
    QCOMPARE(charges, orders);  // 1 : 1, exactly
    QCOMPARE(db_->scalar("SELECT count(*) FROM (SELECT biz_id FROM idem.fund_flows GROUP BY biz_id "
                         "HAVING count(*) <> 1) x"),
             0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"), orders);
    QCOMPARE(s.charges, charges);
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_simulator"); }
  void init() { db_->reset(); }

  void droppedResponsesWithRetriesChargeExactlyOncePerOrder() {
    const sim::SimulationConfig c = faultTestConfig(*db_);
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QCOMPARE(s.errors, 0LL);
    QVERIFY2(s.responsesLost > 150 && s.responsesLost < 250, "about 20% of responses were dropped");
    expectOneChargePerOrder(s, 1000);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"),
             0LL);
    // The retries really happened and were answered by the layer.
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.attempts WHERE trigger_source <> 'initial'") >
            1000);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'"),
             s.responsesLost - s.unknownResolvedByCallback);
  }

  // The seeds' fault test for refunds, payouts and coupons too: 20% of responses dropped, every
  // layer retrying, an operator and the reconciler deciding what is stuck. Side effects to
  // operations 1 : 1 for each type, counted from the downstream's own records (a coupon leaves no
  // ledger line), and the ledger holds each refund's REFUND and each payout's CREDIT once.
  void droppedResponsesRunEachRefundPayoutAndCouponOnce() {
    sim::SimulationConfig c = faultTestConfig(*db_);
    c.bizTypes = {"refund", "payout", "coupon"};
    c.operations = 900;
    // The logins of a deployment: the agents' may not read the records, so the wait for the
    // queue to drain reads them as the operator.
    c.connection.dsn = db_->dsnAs(db_->createLoginRole("rex", "idem_writer"));
    c.ledgerConnection.dsn = db_->dsnAs(db_->createLoginRole("gail", "idem_ledger"));
    c.operatorConnection.dsn = db_->dsnAs(db_->createLoginRole("olga", "idem_operator"));
    c.reconcilerConnection.dsn = db_->dsnAs(db_->createLoginRole("rita", "idem_reconciler"));
    c.settleEvery = std::chrono::milliseconds(50);
    c.reconcileEvery = std::chrono::milliseconds(80);
    c.lease = std::chrono::milliseconds(500);
    c.expireLeasesEvery = std::chrono::milliseconds(100);
    c.crashRate = 0.03;
    // A claim that crashed near the end is settled too, once its lease ran out: without this the
    // run can end (in well under a second) before any crashed claim's lease does.
    c.settleUntilDone = true;
    QTemporaryDir dir;
    c.downstreamJournal = dir.filePath("downstream.tsv").toStdString();
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QCOMPARE(s.errors, 0LL);
    QVERIFY2(s.responsesLost > 120, "about 20% of responses were dropped");

    std::map<std::string, int> effects;  // key -> executions the downstream made
    std::map<std::string, int> byType;
    QFile journal(QString::fromStdString(c.downstreamJournal));
    QVERIFY(journal.open(QIODevice::ReadOnly | QIODevice::Text));
    while (!journal.atEnd()) {
      const QList<QByteArray> f = journal.readLine().trimmed().split('\t');
      QCOMPARE(f.size(), 8);  // key, type, object, kind, amount, ref, deliberate, when
      ++effects[f[0].toStdString()];
      ++byType[f[1].toStdString()];
    }
    for (const auto& [key, n] : effects) QVERIFY2(n == 1, key.c_str());
    for (const char* type : {"refund", "payout", "coupon"}) QVERIFY2(byType[type] > 100, type);
    // A SUCCESS record's side effect happened once, a FAILED one's never (a crash before the
    // downstream call, settled FAILED by the operator who asked the downstream).
    auto c2 = db_->connect();
    pqxx::nontransaction tx(*c2);
    int success = 0, failed = 0;
    for (const pqxx::row& r :
         tx.exec("SELECT idempotency_key, status FROM idem.records WHERE status IN ('SUCCESS', "
                 "'FAILED')")) {
      const std::string key = r[0].c_str();
      const int n = effects.contains(key) ? effects.at(key) : 0;
      if (std::string(r[1].c_str()) == "SUCCESS") {
        ++success;
        QVERIFY2(n == 1, key.c_str());
      } else {
        ++failed;
        QVERIFY2(n == 0, key.c_str());
      }
    }
    const std::string settled = std::to_string(success) + " SUCCESS, " + std::to_string(failed) +
                                " FAILED after " + std::to_string(s.elapsed.count()) + " ms; " +
                                s.render();
    QVERIFY2(success > 800 && failed > 0, settled.c_str());
    QCOMPARE(success + failed, 900);  // nothing left stuck once the operator finished the queue
    QCOMPARE(db_->scalar("SELECT count(*) FROM (SELECT idempotency_key FROM idem.attempts WHERE "
                         "outcome = 'executed' GROUP BY 1 HAVING count(*) > 1) x"),
             0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind IN ('REFUND', 'CREDIT')"),
             (long long)(byType["refund"] + byType["payout"]));
    db_->expectNone(
        {"SELECT count(*) FROM (SELECT biz_id FROM idem.fund_flows GROUP BY biz_id HAVING "
         "count(*) <> 1) x",
         "SELECT count(*) FROM idem.records r WHERE r.status = 'FAILED' AND "
         "idem.side_effect_recorded(r.biz_type, r.biz_id, r.idempotency_key)"});
    // The people decided: coupons by asking the coupon system, refunds and payouts by the ledger.
    QVERIFY(s.settledSuccess + s.reconciled > 0);
  }

  // The fault test with the people and the cron jobs of a deployment running during it, each
  // under its own role: an operator settles stuck records (SUCCESS where money moved, FAILED where
  // nothing did) and idem.reconcile() resolves what the ledger proves. Agents that die after the
  // charge leave PROCESSING records past their lease for them. Still one charge per order.
  void faultTestWithOperatorAndReconcileStillChargesOncePerOrder() {
    sim::SimulationConfig c = faultTestConfig(*db_);
    c.connection.dsn = db_->dsnAs(db_->createLoginRole("agent", "idem_writer"));
    c.ledgerConnection.dsn = db_->dsnAs(db_->createLoginRole("gateway", "idem_ledger"));
    c.operatorConnection.dsn = db_->dsnAs(db_->createLoginRole("alice", "idem_operator"));
    c.reconcilerConnection.dsn = db_->dsnAs(db_->createLoginRole("recon", "idem_reconciler"));
    c.crashRate = 0.05;
    c.crashBeforeChargeShare = 0;  // every crash after the charge: money moved, no SUCCESS
    c.lease = std::chrono::milliseconds(1000);
    c.settleEvery = std::chrono::milliseconds(30);
    c.reconcileEvery = std::chrono::milliseconds(70);
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    qInfo().noquote() << s.render().c_str();
    QCOMPARE(s.errors, 0LL);
    expectOneChargePerOrder(s, 1000);
    QCOMPARE(s.roundsFailed, 0LL);
    // The operator and the reconciler did decide records while the agents ran, under their roles.
    QVERIFY(s.reconciled + s.settledSuccess > 0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'reconciler'"),
             (long long)s.reconciled);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator'"),
             (long long)(s.settledSuccess + s.settledFailed));
    // Every operator decision was alice's; nobody declared FAILED a record whose side effect the
    // ledger records.
    db_->expectNone(
        {"SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator' AND "
         "actor NOT LIKE '%alice%'",
         "SELECT count(*) FROM idem.records r WHERE r.status = 'FAILED' AND "
         "idem.side_effect_recorded(r.biz_type, r.biz_id, r.idempotency_key)"});
    // The ledger has both of its writers: the agents' own reports and the gateway's, which alone
    // knows about the lost responses and the crashes after the charge.
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE recorded_by = 'claimant'") > 0);
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE recorded_by = 'ledger'") > 0);
  }

  // A share of careless clients tries every path to a second execution; the database refuses each
  // one, and the ledger shows not one extra charge (a hole left open would book one under its own
  // gateway reference).
  void carelessClientsAreRefusedEveryHoleAndChargeNothingExtra() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.connection.dsn = db_->dsnAs(db_->createLoginRole("careless", "idem_writer"));
    c.ledgerConnection.dsn = db_->dsnAs(db_->createLoginRole("gateway", "idem_ledger"));
    c.bizTypes = {"payment"};
    c.carelessRate = 0.5;
    c.responseLossRate = 0.25;
    c.declineRate = 0.15;
    c.httpRetryRate = 0.3;
    c.callbackResolvesUnknownRate = 0.5;
    // A careless operator beside them: agents 5ms downstream leave live leases to settle.
    c.operatorConnection.dsn = db_->dsnAs(db_->createLoginRole("bob", "idem_operator"));
    c.settleEvery = std::chrono::milliseconds(20);
    c.downstreamLatency = std::chrono::milliseconds(5);
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    const std::string summary = s.render();
    qInfo().noquote() << summary.c_str();
    QCOMPARE(s.errors, 0LL);
    for (sim::CarelessHole hole : sim::kCarelessHoles) {
      if (hole == sim::CarelessHole::RebeginRetired) continue;  // needs retention: its own test
      const long long enough = hole == sim::CarelessHole::SettleLiveLease ? 0 : 10;
      QVERIFY2(s.holes.contains(hole) && s.holes.at(hole).tried > enough, sim::describe(hole));
      QCOMPARE(s.holes.at(hole).refused, s.holes.at(hole).tried);
    }
    QCOMPARE(s.holesOpen(), 0LL);
    QVERIFY2(summary.find("careless clients") != std::string::npos, summary.c_str());
    QVERIFY2(summary.find("OPEN") == std::string::npos, summary.c_str());
    // No extra charge: one DEBIT per paid order, none for a declined one, none under a careless
    // ref.
    db_->expectNone({"SELECT count(*) FROM idem.fund_flows WHERE external_ref ~ '-1[0-9]$'",
                     "SELECT count(*) FROM (SELECT biz_id FROM idem.fund_flows GROUP BY biz_id "
                     "HAVING count(*) > 1) x",
                     "SELECT count(*) FROM idem.fund_flows f JOIN idem.records r USING "
                     "(biz_type, biz_id) WHERE r.status = 'FAILED'",
                     // No claimant lost its claim to the careless operator: nothing it settled
                     // FAILED ran again.
                     "SELECT count(*) FROM idem.transitions WHERE from_status = 'FAILED'"});
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'"), s.charges);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"),
             db_->scalar("SELECT count(*) FROM idem.records"));
    // The strangers' responses never replaced a claimant's.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE response_payload->>'gateway_ref' "
                         "= 'stranger'"),
             0LL);
    // Declined cards are final: retries were handed the failure back.
    QVERIFY(s.finalFailuresReplayed >= s.declines);
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'FAILED' AND retry_allowed"),
        0LL);
  }

  // After retention, yesterday's traffic replayed (retries that come back days later) is answered
  // `retired`, and a careless client's fresh key for a paid order is `rejected`: nothing runs.
  void trafficReplayedAfterRetentionIsRetiredAndChargesNothing() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.bizTypes = {"payment"};
    c.operations = 200;
    const sim::SimulationSummary first = sim::simulate(c, stop_);
    QCOMPARE(first.charges, 200LL);
    QTest::qWait(20);
    QCOMPARE(db_->scalar("SELECT tombstones_written FROM idem.purge('1 millisecond')"), 200LL);
    c.carelessRate = 1.0;
    const sim::SimulationSummary again = sim::simulate(c, stop_);
    QCOMPARE(again.errors, 0LL);
    QCOMPARE(again.charges, 0LL);
    QCOMPARE(again.attempts.at({TriggerSource::Initial, Outcome::Retired}), 200LL);
    QVERIFY(!again.attempts.contains({TriggerSource::Initial, Outcome::Executed}));
    const sim::HoleCount retired = again.holes.at(sim::CarelessHole::RebeginRetired);
    QCOMPARE(retired.tried, 400LL);  // the key again, then a fresh key, for each order
    QCOMPARE(retired.refused, retired.tried);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows"), 200LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), 0LL);
  }

  // An agent paused past its lease (its downstream answers after the lease ran out and the
  // sweeper made the record UNKNOWN meanwhile) reports its late answer at the version the server
  // returns: every record ends SUCCESS by its own claimant, none is left for the reconciler.
  // A lease long enough that a claim's own answer is never late on a busy machine (that is the
  // next test), a downstream slower than it.
  void anAgentPausedPastItsLeaseReportsItsLateAnswer() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.bizTypes = {"payment"};
    c.operations = 8;
    c.lease = std::chrono::milliseconds(1000);
    c.downstreamLatency = std::chrono::milliseconds(1500);
    c.expireLeasesEvery = std::chrono::milliseconds(20);
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QCOMPARE(s.errors, 0LL);
    QCOMPARE(s.lateClaims, 0LL);
    QCOMPARE(s.lateAnswers, 8LL);
    QCOMPARE(s.rereads, 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS'"), 8LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'UNKNOWN' AND "
                         "to_status = 'SUCCESS' AND actor_kind = 'system'"),
             8LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'"), 8LL);
  }

  // The agent's claim is acknowledged only after its lease ran out (here its insert waits behind
  // another transaction holding the same key, as a commit waits for a synchronous standby that
  // is not there): meanwhile the record looked abandoned, and a person may have settled it. The
  // agent does not go downstream on it; it gives the claim back (FAILED, retry allowed, by its
  // own token) and its framework's retry claims the key afresh and charges, once.
  void aClaimAcknowledgedAfterItsLeaseRanOutIsGivenBack() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.bizTypes = {"payment"};
    c.operations = 1;
    c.agents = 1;
    c.lease = std::chrono::milliseconds(500);
    const std::string key = sim::planOperation(c, 0).key;
    pqxx::connection holder(db_->dsn());
    pqxx::work held(holder);
    held.exec_params("SELECT idem.begin($1, 'payment', 'held', 'pay', NULL, 'initial', '{}')", key);

    sim::SimulationSummary s;
    std::thread run([&] { s = sim::simulate(c, stop_); });
    const bool waited = QTest::qWaitFor(
        [&] {
          return db_->scalar(
                     "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                     "'Lock' AND datname = current_database()") == 1;
        },
        30'000);
    if (waited) std::this_thread::sleep_for(c.lease + std::chrono::milliseconds(200));
    held.abort();
    run.join();
    QVERIFY2(waited, "the agent's claim never waited behind the held key");

    QCOMPARE(s.errors, 0LL);
    QCOMPARE(s.lateClaims, 1LL);
    QCOMPARE(s.charges, 1LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'"), 1LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'SUCCESS'"), 1LL);
    // Given back before anything went downstream, then claimed again by the framework's retry.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'PROCESSING' "
                         "AND to_status = 'FAILED' AND reason LIKE '%after its lease ran out%'"),
             1LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"), 2LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed' AND "
                         "trigger_source = 'framework'"),
             1LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows f JOIN idem.transitions t ON "
                         "t.idempotency_key = f.idempotency_key AND t.to_status = 'FAILED' "
                         "WHERE f.created_at < t.created_at"),
             0LL);
  }

  void buggyDownstreamShowsUpAsDuplicateFundFlows() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.bizTypes = {"payment"};
    c.doubleChargeRate = 0.1;
    c.responseLossRate = 0.2;
    c.httpRetryRate = 0.5;
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QVERIFY(s.doubleCharges > 30);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"),
             s.doubleCharges);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'"),
             600 + s.doubleCharges);
    // Still one execution per order: the duplicates come from downstream, not from retries.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = 'executed'"), 600LL);
  }

  void defaultTrafficProducesEveryCase() {
    sim::SimulationConfig c;
    c.connection.dsn = db_->dsn();
    c.operations = 2000;
    c.seed = 7;
    c.runId = "all";
    c.doubleChargeRate = 0.01;
    c.lease = std::chrono::milliseconds(500);
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QCOMPARE(s.errors, 0LL);
    QCOMPARE(s.attemptsTotal(), db_->scalar("SELECT count(*) FROM idem.attempts"));
    for (TriggerSource source : allValues<TriggerSource>()) {
      QVERIFY2(db_->scalar("SELECT count(*) FROM idem.attempts WHERE trigger_source = '" +
                           std::string(format(source)) + "'") > 0,
               format(source).data());
    }
    for (Outcome outcome : allValues<Outcome>()) {
      if (outcome == Outcome::Retired) continue;  // only after retention: its own test
      QVERIFY2(db_->scalar("SELECT count(*) FROM idem.attempts WHERE outcome = '" +
                           std::string(format(outcome)) + "'") > 0,
               format(outcome).data());
    }
    // Client-side counts per source and outcome equal the table's.
    for (const auto& [key, n] : s.attempts) {
      QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts WHERE trigger_source = '" +
                           std::string(format(key.first)) + "' AND outcome = '" +
                           std::string(format(key.second)) + "'"),
               (long long)n);
    }
    QTest::qWait(550);
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'PROCESSING' AND "
                        "lease_expires_at < now()") > 0);  // crashes
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'") >
            0);  // lost responses
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.transitions WHERE from_status = 'FAILED'") >
            0);                            // refused connections re-run
    QVERIFY(s.finalFailuresReplayed > 0);  // declined cards: final, the retry is replayed
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM idem.fund_flows f JOIN idem.records r USING (biz_type, "
                    "biz_id) WHERE r.status = 'FAILED' AND r.retry_allowed = false"),
        0LL);
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL") > 0);
    QVERIFY(db_->scalar("SELECT count(DISTINCT biz_type) FROM idem.records") == 3);
    // Money moved without a SUCCESS record (crash after charge): what reconciliation looks for.
    QVERIFY(db_->scalar("SELECT count(*) FROM idem.fund_flows f WHERE kind = 'DEBIT' AND NOT "
                        "EXISTS (SELECT 1 FROM idem.records r WHERE r.biz_type = f.biz_type AND "
                        "r.biz_id = f.biz_id AND r.status = 'SUCCESS')") > 0);
  }

  void sameSeedPlansSameTraffic() {
    sim::SimulationConfig c;
    c.seed = 99;
    c.runId = "r";
    for (std::int64_t i = 0; i < 500; ++i) {
      const sim::OperationPlan a = sim::planOperation(c, i), b = sim::planOperation(c, i);
      QCOMPARE(a.key, b.key);
      QCOMPARE(a.amountMinor, b.amountMinor);
      QCOMPARE(static_cast<int>(a.fault), static_cast<int>(b.fault));
      QCOMPARE(a.retries.size(), b.retries.size());
    }
    c.seed = 100;
    int differ = 0;
    sim::SimulationConfig d = c;
    d.seed = 99;
    for (std::int64_t i = 0; i < 500; ++i)
      differ += sim::planOperation(c, i).amountMinor != sim::planOperation(d, i).amountMinor;
    QVERIFY(differ > 400);

    // Two runs with one seed leave the same tables (no concurrent copies: their winner is timing).
    auto run = [&](const std::string& name) {
      test::TestDatabase db(name);
      sim::SimulationConfig r;
      r.connection.dsn = db.dsn();
      r.operations = 400;
      r.seed = 5;
      r.runId = "same";
      r.concurrentDuplicateRate = 0;
      sim::simulate(r, stop_);
      pqxx::connection conn(db.dsn());
      pqxx::nontransaction tx(conn);
      return std::string(
          tx.exec("SELECT md5(string_agg(idempotency_key || status || version || attempt_count, "
                  "',' ORDER BY idempotency_key)) || "
                  "(SELECT md5(string_agg(idempotency_key || trigger_source || outcome, ',' ORDER "
                  "BY idempotency_key, trigger_source, outcome)) FROM idem.attempts) || "
                  "(SELECT md5(string_agg(external_ref || amount_minor || (duplicate_of IS NULL), "
                  "',' ORDER BY external_ref)) FROM idem.fund_flows) "
                  "FROM idem.records")[0][0]
              .c_str());
    };
    QCOMPARE(run("tst_simulator_a"), run("tst_simulator_b"));
  }

  void stopFlagAndDurationBoundTheRun() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.operations = 0;  // unbounded
    c.duration = std::chrono::milliseconds(400);
    const auto started = std::chrono::steady_clock::now();
    const sim::SimulationSummary s = sim::simulate(c, stop_);
    QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
    QVERIFY(s.operations > 0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE status = 'PROCESSING'"), 0LL);
  }

  void operatorAndReconcilerWithoutTheirRolesRefuseToStart() {
    sim::SimulationConfig c = quietConfig(*db_);
    c.connection.dsn = db_->dsnAs(db_->createLoginRole("writer", "idem_writer"));
    c.settleEvery = std::chrono::milliseconds(100);  // as the agents' writer login
    try {
      sim::simulate(c, stop_);
      QFAIL("an operator without idem_operator started");
    } catch (const DatabaseError& e) {
      QVERIFY2(std::string(e.what()).find("--settle-every (with --operator-dsn) needs a login "
                                          "granted idem_operator") != std::string::npos,
               e.what());
    }
    c.settleEvery = {};
    c.reconcileEvery = std::chrono::milliseconds(100);
    QVERIFY_THROWS_EXCEPTION(DatabaseError, sim::simulate(c, stop_));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.attempts"), 0LL);
  }

  void invalidConfigIsNamed() {
    sim::SimulationConfig c;
    c.agents = 0;
    c.responseLossRate = 1.5;
    c.bizTypes = {};
    const auto problems = c.validate();
    QCOMPARE(problems.size(),
             std::size_t(4));  // agents, the rate, the sum of fault rates, no biz types
    QVERIFY(problems[0].find("--agents") != std::string::npos);

    // Through the proxy: an address that is not http://HOST:PORT, no address for the tool, and
    // careless clients, whose holes are the protocol's own.
    sim::SimulationConfig viaProxy;
    viaProxy.throughProxy = "https://proxy.example/charges";
    viaProxy.carelessRate = 0.1;
    const auto said = viaProxy.validate();
    QCOMPARE(said.size(), std::size_t(3));
    QVERIFY2(said[0].find("'https://proxy.example/charges' is not http://HOST:PORT") !=
                 std::string::npos,
             said[0].c_str());
    QVERIFY2(said[1].find("needs --tool-listen HOST:PORT") != std::string::npos, said[1].c_str());
    QVERIFY2(said[2].find("--careless-rate") != std::string::npos, said[2].c_str());
  }
};

QTEST_GUILESS_MAIN(TestSimulator)
#include "tst_simulator.moc"

#include "simulator.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iomanip>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "agent.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/session_role.hpp"
#include "idem/settlement.hpp"
#include "plan.hpp"
#include "through_proxy.hpp"

namespace idem::sim {
namespace {

using Clock = std::chrono::steady_clock;

// Operations are handed out by index; concurrent copies of a request wait in a small queue that
// idle agents drain first, so copies really arrive together.
class WorkQueue {
 public:
  WorkQueue(const SimulationConfig& config, const std::atomic<bool>& stop)
      : config_(config), stop_(stop), start_(Clock::now()) {}

  struct Task {
    OperationPlan plan;
    bool isCopy = false;
  };

  std::optional<Task> next() {
    {
      std::lock_guard lock(mutex_);
      if (!copies_.empty()) {
        Task t{copies_.front(), true};
        copies_.pop_front();
        return t;
      }
    }
    if (finished()) return std::nullopt;
    const std::int64_t index = next_.fetch_add(1);
    if (config_.operations > 0 && index >= config_.operations) return std::nullopt;
    if (!waitForTurn(index)) return std::nullopt;
    Task t{planOperation(config_, index), false};
    if (t.plan.concurrentCopies > 1) {
      std::lock_guard lock(mutex_);
      for (int i = 1; i < t.plan.concurrentCopies; ++i) copies_.push_back(t.plan);
    }
    return t;
  }

  bool finished() const {
    if (stop_.load()) return true;
    return config_.duration.count() > 0 && Clock::now() - start_ >= config_.duration;
  }

 private:
  // Throttling: operation i starts no earlier than start + i / rate.
  bool waitForTurn(std::int64_t index) {
    if (config_.operationsPerSecond <= 0) return true;
    const auto due =
        start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                     static_cast<double>(index) / config_.operationsPerSecond));
    while (Clock::now() < due) {
      if (finished()) return false;
      std::this_thread::sleep_for(
          std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(100)));
    }
    return !finished();
  }

  const SimulationConfig& config_;
  const std::atomic<bool>& stop_;
  const Clock::time_point start_;
  std::atomic<std::int64_t> next_{0};
  std::mutex mutex_;
  std::deque<OperationPlan> copies_;
};

void agentLoop(int number, const SimulationConfig& config, WorkQueue& work,
               TrafficCounters& counters, Downstream& downstream) {
  Agent agent("agent-" + std::to_string(number), config, counters, downstream);
  auto backoff = std::chrono::milliseconds(100);
  while (auto task = work.next()) {
    try {
      agent.run(task->plan, task->isCopy);
      if (!task->isCopy) counters.operations.fetch_add(1);
      backoff = std::chrono::milliseconds(100);
    } catch (const DatabaseError& e) {
      // The operation is abandoned where it stood, as a real agent's would be.
      counters.errors.fetch_add(1);
      if (!task->isCopy) counters.operations.fetch_add(1);
      if (e.endsSession()) {
        agent.resetConnection();
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      }
    }
  }
}

// An agent behind idemwatch-proxy: its requests are HTTP, the proxy claims them.
void httpAgentLoop(int number, const SimulationConfig& config, WorkQueue& work,
                   TrafficCounters& counters) {
  HttpAgent agent("agent-" + std::to_string(number), config, counters);
  while (auto task = work.next()) {
    agent.run(task->plan, task->isCopy);
    if (!task->isCopy) counters.operations.fetch_add(1);
  }
}

// Runs `round` every `every` until `done`, on a connection of its own that survives errors; a
// failed round is counted (the summary's "rounds failed").
template <typename Round>
void periodically(const ConnectionSettings& settings, std::chrono::milliseconds every,
                  const std::atomic<bool>& done, std::atomic<std::int64_t>& failed, Round&& round) {
  std::unique_ptr<pqxx::connection> connection;
  auto last = Clock::now();
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Clock::now() - last < every) continue;
    last = Clock::now();
    try {
      if (!connection) connection = connect(settings);
      round(*connection);
    } catch (const DatabaseError&) {
      failed.fetch_add(1);
      connection.reset();
    }
  }
}

// The operator and the reconciler need their roles; a login without them would fail every round
// in silence, so the run refuses to start instead, naming the flag.
void requireRole(const ConnectionSettings& settings, const char* role, const char* flags) {
  auto connection = connect(settings);
  if (!sessionMembership(*connection, role, "simulate").member) {
    throw DatabaseError("42501", std::string("simulate: ") + flags + " needs a login granted " +
                                     role + "; " + settings.redacted() + " is not");
  }
}

const ConnectionSettings& orAgents(const ConnectionSettings& s, const SimulationConfig& config) {
  return s.dsn.empty() ? config.connection : s;
}

// This run's stuck records (idem.is_stuck: UNKNOWN, or PROCESSING past its lease), oldest
// decision first.
constexpr const char* kStuck =
    "SELECT idempotency_key FROM idem.records "
    "WHERE idem.is_stuck(status, lease_expires_at) "
    "AND left(biz_id, length($1)) = $1 ORDER BY updated_at LIMIT 500";

// In flight right now, with at least half its lease ($2 ms) to run: the claimant is downstream and
// will answer, and the lease is still live when the careless settle arrives a moment later.
constexpr const char* kInFlight =
    "SELECT idempotency_key, version FROM idem.records "
    "WHERE status = 'PROCESSING' AND lease_expires_at > now() + $2 * interval '1 millisecond' "
    "AND left(biz_id, length($1)) = $1 LIMIT 3";

// The careless operator: it settles FAILED a record whose agent was about to answer. The server
// refuses (lease_active); had it not, the agent's retry would charge again.
void carelessOperatorRound(pqxx::connection& connection, const std::string& prefix,
                           std::chrono::milliseconds lease, TrafficCounters& counters) {
  std::vector<std::pair<std::string, int>> live;
  translatingErrors("find records in flight", [&] {
    ReadTransaction tx(connection);
    for (const pqxx::row& r : tx.exec_params(kInFlight, prefix, lease.count() / 2)) {
      live.emplace_back(r[0].c_str(), r[1].as<int>());
    }
    tx.commit();
  });
  for (const auto& [key, version] : live) {
    const SettleOutcome out = settleRecord(
        connection,
        {key, version, RecordStatus::Failed, "the agent looks stuck", std::nullopt, false});
    counters.countHole(CarelessHole::SettleLiveLease, out.verdict != SettleVerdict(ResultCode::Ok));
  }
}

// How many of this run's records are still open: PROCESSING or UNKNOWN. Once the agents have
// stopped, a PROCESSING record is a claim whose agent crashed, though its lease may still run.
constexpr const char* kOpen =
    "SELECT count(*) FROM idem.records WHERE status IN ('PROCESSING', 'UNKNOWN') "
    "AND left(biz_id, length($1)) = $1";

// Waits, with the helpers still running, until none of this run's records is open: through a
// lease (a crashed claim cannot be settled before its lease ends), then for as long as the open
// records keep falling; three of the helpers' rounds (at least a second) without one settled ends
// the wait (a record the operator cannot settle stays open). Read as the operator, whose login may
// read the records (the agents' may not).
void awaitSettled(const SimulationConfig& config, const std::atomic<bool>& stop,
                  TrafficCounters& counters) {
  const auto round =
      std::max({config.settleEvery, config.expireLeasesEvery, config.reconcileEvery});
  const auto patience = std::max<Clock::duration>(3 * round, std::chrono::seconds(1));
  auto lastProgress = Clock::now() + config.lease;
  std::optional<long long> fewest;
  const std::string prefix = config.runId.empty() ? "" : config.runId + "-";
  std::unique_ptr<pqxx::connection> connection;
  while (!stop.load() && Clock::now() - lastProgress < patience) {
    try {
      const long long open = translatingErrors("wait for the run's records to settle", [&] {
        if (!connection) connection = connect(orAgents(config.operatorConnection, config));
        ReadTransaction tx(*connection);
        const auto n = tx.exec_params1(kOpen, prefix)[0].as<long long>();
        tx.commit();
        return n;
      });
      if (open == 0) return;
      if (fewest && open < *fewest) lastProgress = std::max(lastProgress, Clock::now());
      if (!fewest || open < *fewest) fewest = open;
    } catch (const DatabaseError&) {
      counters.roundsFailed.fetch_add(1);
      connection.reset();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The operator of the seeds: looks at the evidence of each stuck record and decides. The ledger's
// word first: SUCCESS where it records the side effect (the server's idem.side_effect_of). Where it
// does not, FAILED on the ledger's word only when the gateway's statement has caught up (every
// movement the downstream made is in it); otherwise, and always for a side effect that leaves no
// ledger line (a coupon), the operator asks the downstream itself, as a person checks the
// gateway's or the coupon system's console, and settles by what it says. The server has the last
// word: a refusal (the side effect recorded meanwhile, a live lease, someone decided first) is
// counted and the record left for the next round.
void operatorRound(pqxx::connection& connection, const SimulationConfig& config,
                   TrafficCounters& counters, const Downstream& downstream) {
  const std::string prefix = config.runId.empty() ? "" : config.runId + "-";
  if (config.carelessRate > 0) carelessOperatorRound(connection, prefix, config.lease, counters);
  std::vector<std::string> keys;
  translatingErrors("find stuck records", [&] {
    ReadTransaction tx(connection);
    for (const pqxx::row& r : tx.exec_params(kStuck, prefix)) keys.emplace_back(r[0].c_str());
    tx.commit();
  });
  for (const std::string& key : keys) {
    const SettleAssessment seen = assessSettle(connection, key, RecordStatus::Failed);
    if (!seen.record || seen.leaseActive) continue;
    SettleRequest request;
    request.key = key;
    request.expectedVersion = seen.record->version;
    if (seen.sideEffectRecorded) {
      request.to = RecordStatus::Success;
      request.reason = "the ledger records the " + seen.record->bizType + " under this key";
    } else if (seen.ledgerCanTell && config.gatewayReportEvery.count() > 0 &&
               downstream.statementCaughtUp()) {
      request.to = RecordStatus::Failed;
      request.reason = "the gateway's statement shows nothing for this request";
    } else {
      const std::vector<SideEffect> done = downstream.effectsOf(key);
      request.to = done.empty() ? RecordStatus::Failed : RecordStatus::Success;
      request.reason = done.empty() ? "the downstream's console shows nothing for this request"
                                    : "the downstream's console shows " + done.front().ref;
      if (!done.empty()) request.evidence = R"({"downstream_ref": ")" + done.front().ref + "\"}";
    }
    const SettleOutcome out = settleRecord(connection, request);
    if (out.verdict != SettleVerdict(ResultCode::Ok)) {
      counters.settleRefused.fetch_add(1);
    } else if (request.to == RecordStatus::Success) {
      counters.settledSuccess.fetch_add(1);
    } else {
      counters.settledFailed.fetch_add(1);
    }
  }
}

}  // namespace

std::vector<std::string> SimulationConfig::validate() const {
  std::vector<std::string> problems;
  if (agents < 1 || agents > 256) problems.emplace_back("--agents must be between 1 and 256");
  if (operations < 0) problems.emplace_back("--requests must not be negative");
  if (operationsPerSecond < 0) problems.emplace_back("--rate must not be negative");
  if (bizTypes.empty()) problems.emplace_back("--biz-types needs at least one business type");
  for (const auto& t : bizTypes) {
    if (t.empty()) problems.emplace_back("--biz-types has an empty business type");
  }
  const std::pair<const char*, double> rates[] = {
      {"--response-loss-rate", responseLossRate},
      {"--crash-rate", crashRate},
      {"--decline-rate", declineRate},
      {"--refused-rate", refusedRate},
      {"--careless-rate", carelessRate},
      {"--llm-retry-rate", llmRetryRate},
      {"--framework-retry-rate", frameworkRetryRate},
      {"--http-retry-rate", httpRetryRate},
      {"--callback-rate", callbackRate},
      {"--mismatch-rate", mismatchRate},
      {"--new-key-rate", newKeyRate},
      {"--concurrent-duplicate-rate", concurrentDuplicateRate},
      {"--double-charge-rate", doubleChargeRate},
      {"--callback-resolves-rate", callbackResolvesUnknownRate},
      {"--crash-before-charge-share", crashBeforeChargeShare}};
  for (const auto& [flag, value] : rates) {
    if (!(value >= 0.0 && value <= 1.0)) {
      problems.push_back(std::string(flag) + " must be a probability between 0 and 1");
    }
  }
  if (responseLossRate + crashRate + declineRate + refusedRate > 1.0) {
    problems.emplace_back(
        "--response-loss-rate + --crash-rate + --decline-rate + --refused-rate must not exceed 1");
  }
  if (concurrentCopies < 2 || concurrentCopies > 64) {
    problems.emplace_back("--concurrent-copies must be between 2 and 64");
  }
  if (lease.count() <= 0) problems.emplace_back("--lease must be positive");
  if (settleEvery.count() < 0) problems.emplace_back("--settle-every must not be negative");
  if (!throughProxy.empty()) {
    try {
      proxyAddress(throughProxy);
    } catch (const std::invalid_argument& e) {
      problems.emplace_back(std::string("--through-proxy: ") + e.what());
    }
    try {
      proxyAddress("http://" + toolListen);
    } catch (const std::invalid_argument&) {
      problems.emplace_back(
          "--through-proxy needs --tool-listen HOST:PORT, the address its "
          "routes forward to (got '" +
          toolListen + "')");
    }
    if (carelessRate > 0) {
      problems.emplace_back(
          "--careless-rate tries the protocol's holes in-process; not with --through-proxy");
    }
  }
  if (reconcileEvery.count() < 0) problems.emplace_back("--reconcile-every must not be negative");
  return problems;
}

const char* describe(CarelessHole hole) {
  switch (hole) {
    case CarelessHole::ForgeEvidence:
      return "record a flow under another agent's UNKNOWN key without its token";
    case CarelessHole::FailUnknownWithoutToken:
      return "fail an UNKNOWN record without the token, begin again";
    case CarelessHole::FailWithoutToken:
      return "fail another agent's claim without the token";
    case CarelessHole::CompleteForeignClaim:
      return "complete another agent's claim with the version a mismatch handed out";
    case CarelessHole::CompleteStaleVersion:
      return "complete with a stale version and no token";
    case CarelessHole::RetryFinalFailure:
      return "retry a final failure (declined card)";
    case CarelessHole::NewKeyForPaidObject:
      return "begin under a fresh key for a paid business object";
    case CarelessHole::SettleLiveLease:
      return "settle FAILED a PROCESSING record whose lease is live (operator)";
    case CarelessHole::RebeginRetired:
      return "begin a retired key again, then under a fresh key";
  }
  return "?";
}

std::int64_t SimulationSummary::holesOpen() const {
  std::int64_t n = 0;
  for (const auto& [_, c] : holes) n += c.tried - c.refused;
  return n;
}

std::int64_t SimulationSummary::attemptsTotal() const {
  std::int64_t n = 0;
  for (const auto& [_, count] : attempts) n += count;
  return n;
}

std::string SimulationSummary::render() const {
  std::ostringstream out;
  out << "operations " << operations << ", requests " << attemptsTotal() << ", in " << std::fixed
      << std::setprecision(1) << static_cast<double>(elapsed.count()) / 1000.0 << " s\n";
  out << std::left << std::setw(10) << "source";
  for (Outcome o : allValues<Outcome>()) out << std::right << std::setw(18) << format(o);
  out << "\n";
  for (TriggerSource s : allValues<TriggerSource>()) {
    out << std::left << std::setw(10) << format(s);
    for (Outcome o : allValues<Outcome>()) {
      auto it = attempts.find({s, o});
      out << std::right << std::setw(18) << (it == attempts.end() ? 0 : it->second);
    }
    out << "\n";
  }
  out << "charges " << charges << " (double charges by the buggy downstream " << doubleCharges
      << "), responses lost " << responsesLost << " (resolved by callback "
      << unknownResolvedByCallback << "), crashes " << crashes << ", declines " << declines
      << " (final; retries replayed the failure " << finalFailuresReplayed
      << "), refused connections " << refusedConnections << " (retried), errors " << errors << "\n";
  out << "late answers reported after the lease ran out " << lateAnswers
      << ", claims acknowledged after their lease given back " << lateClaims
      << ", flows the gateway reported " << reportedByGateway
      << ", calls sent again after a broken connection " << resent << "\n";
  out << "re-reads after conflict or not_claimant " << rereads << " (none re-ran downstream)";
  if (settledSuccess + settledFailed + settleRefused > 0) {
    out << ", operator settled " << settledSuccess << " SUCCESS and " << settledFailed
        << " FAILED (" << settleRefused << " refused by the server)";
  }
  if (reconciled > 0) out << ", reconcile resolved " << reconciled;
  if (roundsFailed > 0) {
    out << ", " << roundsFailed << " rounds of the sweeper, operator or reconciler failed";
  }
  out << "\n";
  if (!holes.empty()) {
    out << "careless clients (every attempt must be refused):\n";
    for (const auto& [hole, c] : holes) {
      out << "  " << std::left << std::setw(72) << describe(hole) << std::right << " tried "
          << c.tried << ", refused " << c.refused << (c.tried == c.refused ? "" : "  OPEN") << "\n";
    }
  }
  return out.str();
}

SimulationSummary simulate(const SimulationConfig& config, const std::atomic<bool>& stop,
                           const std::function<void(const Progress&)>& progress) {
  // Fail fast, with the libpq message, when the database is unreachable.
  connect(config.connection);
  if (config.settleEvery.count() > 0) {
    requireRole(orAgents(config.operatorConnection, config), "idem_operator",
                "--settle-every (with --operator-dsn)");
  }
  if (config.reconcileEvery.count() > 0) {
    requireRole(orAgents(config.reconcilerConnection, config), "idem_reconciler",
                "--reconcile-every (with --reconciler-dsn)");
  }

  const bool gatewayReports = config.gatewayReportEvery.count() > 0;
  if (gatewayReports) {
    requireRole(orAgents(config.ledgerConnection, config), "idem_ledger",
                "the gateway's reports to the ledger (--ledger-dsn, or --gateway-report-every 0)");
  }

  TrafficCounters counters;
  Downstream downstream(config.downstreamJournal,
                        {.mode = config.gatewayReports,
                         .callbackShare = config.gatewayCallbackShare,
                         .callbackRepeatRate = config.gatewayCallbackRepeatRate,
                         .gateway = config.gatewayName,
                         .truthPath = config.gatewayTruth});
  std::optional<ToolServer> tool;
  if (!config.throughProxy.empty()) tool.emplace(config, counters, downstream);
  WorkQueue work(config, stop);
  const auto started = Clock::now();
  std::atomic<int> running{config.agents};
  std::atomic<bool> agentsDone{false};

  std::vector<std::jthread> agents;
  agents.reserve(static_cast<std::size_t>(config.agents));
  for (int i = 0; i < config.agents; ++i) {
    agents.emplace_back([&, i] {
      if (tool) {
        httpAgentLoop(i + 1, config, work, counters);
      } else {
        agentLoop(i + 1, config, work, counters, downstream);
      }
      running.fetch_sub(1);
    });
  }
  // The cron jobs and people of a deployment, beside the agents.
  std::vector<std::jthread> helpers;
  if (config.expireLeasesEvery.count() > 0) {
    helpers.emplace_back([&] {
      periodically(config.connection, config.expireLeasesEvery, agentsDone, counters.roundsFailed,
                   [](pqxx::connection& c) { ProtocolClient(c).expireLeases(); });
    });
  }
  if (config.settleEvery.count() > 0) {
    helpers.emplace_back([&] {
      periodically(orAgents(config.operatorConnection, config), config.settleEvery, agentsDone,
                   counters.roundsFailed,
                   [&](pqxx::connection& c) { operatorRound(c, config, counters, downstream); });
    });
  }
  // The gateway's side, on its own login: what the downstream did, whoever heard back. It reports
  // until the agents are done and then once more, so the run ends with the statement in the ledger.
  std::atomic<bool> gatewayDone{false};
  std::jthread gateway;
  // However this function ends, the helpers' and the gateway's loops end before their threads are
  // joined (destroyed first, this sets both flags; a jthread's stop token is not what they watch).
  struct EndLoops {
    std::atomic<bool>& agents;
    std::atomic<bool>& gateway;
    EndLoops(std::atomic<bool>& a, std::atomic<bool>& g) : agents(a), gateway(g) {}
    EndLoops(const EndLoops&) = delete;
    EndLoops& operator=(const EndLoops&) = delete;
    ~EndLoops() {
      agents.store(true);
      gateway.store(true);
    }
  } endLoops{agentsDone, gatewayDone};
  if (gatewayReports) {
    gateway = std::jthread([&] {
      periodically(orAgents(config.ledgerConnection, config), config.gatewayReportEvery,
                   gatewayDone, counters.roundsFailed, [&](pqxx::connection& c) {
                     counters.reportedByGateway.fetch_add(downstream.reportToLedger(c));
                   });
    });
  }
  if (!config.statementOut.empty() && config.statementEvery.count() > 0) {
    helpers.emplace_back([&] {
      while (!agentsDone.load()) {
        const auto until = Clock::now() + config.statementEvery;
        while (!agentsDone.load() && Clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        try {
          downstream.writeStatement(config.statementOut, config.statementFormat);
        } catch (const std::runtime_error&) {
          counters.roundsFailed.fetch_add(1);
        }
      }
    });
  }
  if (config.reconcileEvery.count() > 0) {
    helpers.emplace_back([&] {
      periodically(orAgents(config.reconcilerConnection, config), config.reconcileEvery, agentsDone,
                   counters.roundsFailed, [&](pqxx::connection& c) {
                     counters.reconciled.fetch_add(ProtocolClient(c).reconcile());
                   });
    });
  }

  auto lastProgress = Clock::now();
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (progress && Clock::now() - lastProgress >= std::chrono::seconds(1)) {
      lastProgress = Clock::now();
      progress({counters.operations.load(), counters.attemptsTotal.load(), counters.errors.load(),
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)});
    }
  }
  agents.clear();
  tool.reset();
  if (config.settleUntilDone && config.settleEvery.count() > 0)
    awaitSettled(config, stop, counters);
  agentsDone.store(true);
  helpers.clear();
  gatewayDone.store(true);
  gateway = {};
  if (gatewayReports && !downstream.statementCaughtUp()) {
    for (int attempt = 0; attempt < 50 && !downstream.statementCaughtUp(); ++attempt) {
      try {
        auto ledger = connect(orAgents(config.ledgerConnection, config));
        counters.reportedByGateway.fetch_add(downstream.reportToLedger(*ledger));
      } catch (const DatabaseError&) {
        counters.roundsFailed.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }

  // The day's statement: every movement, whoever heard back.
  if (!config.statementOut.empty())
    downstream.writeStatement(config.statementOut, config.statementFormat);

  SimulationSummary summary = counters.summary();
  summary.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return summary;
}

}  // namespace idem::sim

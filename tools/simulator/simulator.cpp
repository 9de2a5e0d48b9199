#include "simulator.hpp"

#include <condition_variable>
#include <deque>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent.hpp"
#include "idem/database_error.hpp"
#include "plan.hpp"

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
    const auto due = start_ + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(static_cast<double>(index) /
                                                                config_.operationsPerSecond));
    while (Clock::now() < due) {
      if (finished()) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(due - Clock::now(),
                                                            std::chrono::milliseconds(100)));
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
               TrafficCounters& counters) {
  Agent agent("agent-" + std::to_string(number), config, counters);
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
      if (e.isConnectionLoss()) {
        agent.resetConnection();
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      }
    }
  }
}

// Turns PROCESSING records past their lease into UNKNOWN, as a deployment's cron job would.
void leaseSweeper(const SimulationConfig& config, const std::atomic<bool>& done) {
  std::unique_ptr<pqxx::connection> connection;
  auto last = Clock::now();
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Clock::now() - last < config.expireLeasesEvery) continue;
    last = Clock::now();
    try {
      if (!connection) connection = connect(config.connection);
      ProtocolClient(*connection).expireLeases();
    } catch (const DatabaseError&) {
      connection.reset();
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
      {"--response-loss-rate", responseLossRate}, {"--crash-rate", crashRate},
      {"--decline-rate", declineRate},            {"--llm-retry-rate", llmRetryRate},
      {"--framework-retry-rate", frameworkRetryRate}, {"--http-retry-rate", httpRetryRate},
      {"--callback-rate", callbackRate},          {"--mismatch-rate", mismatchRate},
      {"--new-key-rate", newKeyRate},             {"--concurrent-duplicate-rate", concurrentDuplicateRate},
      {"--double-charge-rate", doubleChargeRate}, {"--callback-resolves-rate", callbackResolvesUnknownRate},
      {"--crash-before-charge-share", crashBeforeChargeShare}};
  for (const auto& [flag, value] : rates) {
    if (!(value >= 0.0 && value <= 1.0)) {
      problems.push_back(std::string(flag) + " must be a probability between 0 and 1");
    }
  }
  if (responseLossRate + crashRate + declineRate > 1.0) {
    problems.emplace_back("--response-loss-rate + --crash-rate + --decline-rate must not exceed 1");
  }
  if (concurrentCopies < 2 || concurrentCopies > 64) {
    problems.emplace_back("--concurrent-copies must be between 2 and 64");
  }
  if (lease.count() <= 0) problems.emplace_back("--lease must be positive");
  return problems;
}

std::int64_t SimulationSummary::attemptsTotal() const {
  std::int64_t n = 0;
  for (const auto& [_, count] : attempts) n += count;
  return n;
}

std::string SimulationSummary::render() const {
  std::ostringstream out;
  out << "operations " << operations << ", requests " << attemptsTotal() << ", in "
      << std::fixed << std::setprecision(1) << static_cast<double>(elapsed.count()) / 1000.0
      << " s\n";
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
      << ", database errors " << errors << "\n";
  return out.str();
}

SimulationSummary simulate(const SimulationConfig& config, const std::atomic<bool>& stop,
                           const std::function<void(const Progress&)>& progress) {
  // Fail fast, with the libpq message, when the database is unreachable.
  connect(config.connection);

  TrafficCounters counters;
  WorkQueue work(config, stop);
  const auto started = Clock::now();
  std::atomic<int> running{config.agents};
  std::atomic<bool> agentsDone{false};

  std::vector<std::jthread> agents;
  for (int i = 0; i < config.agents; ++i) {
    agents.emplace_back([&, i] {
      agentLoop(i + 1, config, work, counters);
      running.fetch_sub(1);
    });
  }
  std::jthread sweeper;
  if (config.expireLeasesEvery.count() > 0) {
    sweeper = std::jthread([&] { leaseSweeper(config, agentsDone); });
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
  agentsDone.store(true);
  sweeper = {};

  SimulationSummary summary = counters.summary();
  summary.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return summary;
}

}  // namespace idem::sim

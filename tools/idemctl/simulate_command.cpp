#include <iomanip>
#include <ostream>
#include <sstream>

#include "database_flags.hpp"
#include "idemctl.hpp"
#include "simulator.hpp"

namespace idem::ctl {
namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

struct RateFlag {
  const char* name;
  double sim::SimulationConfig::*field;
  const char* help;
};

const RateFlag kRates[] = {
    {"response-loss-rate", &sim::SimulationConfig::responseLossRate,
     "downstream charged but the response was lost: the record goes UNKNOWN"},
    {"crash-rate", &sim::SimulationConfig::crashRate,
     "the agent dies after `executed`: PROCESSING left behind past its lease"},
    {"crash-before-charge-share", &sim::SimulationConfig::crashBeforeChargeShare,
     "of the crashes, the share that die before the downstream call"},
    {"decline-rate", &sim::SimulationConfig::declineRate,
     "definite downstream failures, e.g. a declined card: final (retry_allowed false), a retry is "
     "replayed the error"},
    {"refused-rate", &sim::SimulationConfig::refusedRate,
     "connection refused before sending: a retryable failure, run again with the same key"},
    {"careless-rate", &sim::SimulationConfig::carelessRate,
     "operations whose client tries the holes schema v2 closes (default 0; the demo: 0.05)"},
    {"llm-retry-rate", &sim::SimulationConfig::llmRetryRate, "the model re-issues the call"},
    {"framework-retry-rate", &sim::SimulationConfig::frameworkRetryRate,
     "the agent framework's retry policy fires"},
    {"http-retry-rate", &sim::SimulationConfig::httpRetryRate, "the HTTP client retries"},
    {"callback-rate", &sim::SimulationConfig::callbackRate, "an async callback re-delivers"},
    {"mismatch-rate", &sim::SimulationConfig::mismatchRate,
     "an LLM retry with changed arguments (payload mismatch)"},
    {"new-key-rate", &sim::SimulationConfig::newKeyRate,
     "an LLM retry under a fresh key for the same business object (rejected)"},
    {"concurrent-duplicate-rate", &sim::SimulationConfig::concurrentDuplicateRate,
     "the request reaches several agents at once"},
    {"double-charge-rate", &sim::SimulationConfig::doubleChargeRate,
     "buggy downstream: a second charge under another gateway reference"},
    {"callback-resolves-rate", &sim::SimulationConfig::callbackResolvesUnknownRate,
     "share of UNKNOWN records a gateway callback later completes"},
};

std::string rate(const sim::Progress& p) {
  const double seconds = std::max(0.001, static_cast<double>(p.elapsed.count()) / 1000.0);
  std::ostringstream out;
  out << std::fixed << std::setprecision(0) << static_cast<double>(p.attempts) / seconds;
  return out.str();
}

}  // namespace

int runSimulate(const std::vector<std::string>& args, Streams streams,
                const std::atomic<bool>& stop) {
  std::vector<FlagSpec> specs{
      {"agents", true, "N", "concurrent agents, one connection each (default 4)"},
      {"seed", true, "N", "seed: the same seed plans the same traffic (default 1)"},
      {"requests", true, "N", "business operations to run; 0 = no bound (default 1000)"},
      {"duration", true, "DURATION", "stop after this long, e.g. 10m; 0 = no bound (default 0)"},
      {"rate", true, "OPS/S", "operations per second across all agents; 0 = flat out (default 0)"},
      {"biz-types", true, "LIST", "comma-separated business types (default payment,refund,coupon)"},
      {"run-id", true, "TEXT", "prefix for keys and business ids (default: seed and start time)"},
      {"lease", true, "DURATION", "lease given to each claim (default 15s)"},
      {"expire-leases-every", true, "DURATION",
       "run idem.expire_leases() this often; 0 = never (default 0)"},
      {"settle-every", true, "DURATION",
       "an operator settles this run's stuck records this often: SUCCESS where money moved, "
       "FAILED where nothing did; 0 = never (default 0)"},
      {"reconcile-every", true, "DURATION",
       "run idem.reconcile() this often; 0 = never (default 0)"},
      {"operator-dsn", true, "DSN", "the operator's login, an idem_operator (default: --db.dsn)"},
      {"reconciler-dsn", true, "DSN",
       "the reconciler's login, an idem_reconciler (default: --db.dsn)"},
      {"downstream-latency", true, "DURATION", "how long each downstream call takes (default 0)"},
      {"concurrent-copies", true, "N", "copies of a concurrently duplicated request (default 3)"},
      {"quiet", false, "", "no progress line"},
      dsnFlag(),
      helpFlag()};
  for (const RateFlag& r : kRates) specs.push_back({r.name, true, "P", r.help});
  const CommandLine cli(args, specs);
  if (cli.has("help")) {
    streams.out << "usage: idemctl simulate [flags]\n\n" << CommandLine::describe(specs);
    return kOk;
  }
  if (!cli.positionals().empty())
    throw UsageError("unexpected argument '" + cli.positionals().front() + "'");

  sim::SimulationConfig config;
  config.connection = connectionFrom(cli, "idemctl simulate");
  config.agents = static_cast<int>(cli.integer("agents", 1, 256).value_or(config.agents));
  config.seed = static_cast<std::uint64_t>(cli.integer("seed", 0, INT64_MAX).value_or(1));
  config.operations = cli.integer("requests", 0, INT64_MAX).value_or(config.operations);
  config.duration = cli.duration("duration").value_or(config.duration);
  config.operationsPerSecond = cli.number("rate", 0, 1e6).value_or(0);
  if (auto types = cli.value("biz-types")) config.bizTypes = splitList(*types);
  config.lease = cli.duration("lease").value_or(config.lease);
  config.expireLeasesEvery = cli.duration("expire-leases-every").value_or(config.expireLeasesEvery);
  config.settleEvery = cli.duration("settle-every").value_or(config.settleEvery);
  config.reconcileEvery = cli.duration("reconcile-every").value_or(config.reconcileEvery);
  if (cli.has("operator-dsn")) {
    config.operatorConnection = ConnectionSettings::resolve(cli.value("operator-dsn"));
    config.operatorConnection.applicationName = "idemctl simulate (operator)";
  }
  if (cli.has("reconciler-dsn")) {
    config.reconcilerConnection = ConnectionSettings::resolve(cli.value("reconciler-dsn"));
    config.reconcilerConnection.applicationName = "idemctl simulate (reconciler)";
  }
  config.downstreamLatency = cli.duration("downstream-latency").value_or(config.downstreamLatency);
  config.concurrentCopies =
      static_cast<int>(cli.integer("concurrent-copies", 2, 64).value_or(config.concurrentCopies));
  for (const RateFlag& r : kRates) {
    if (auto v = cli.number(r.name, 0.0, 1.0)) config.*(r.field) = *v;
  }
  config.runId = cli.valueOr(
      "run-id", "s" + std::to_string(config.seed) + "-" +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count()));
  if (const auto problems = config.validate(); !problems.empty())
    throw UsageError(problems.front());

  const bool showProgress = streams.interactive && !cli.has("quiet");
  const sim::SimulationSummary summary = sim::simulate(config, stop, [&](const sim::Progress& p) {
    if (!showProgress) return;
    streams.err << "\r" << p.operations << " operations, " << p.attempts << " requests (" << rate(p)
                << "/s), " << p.errors << " errors, " << p.elapsed.count() / 1000 << " s   "
                << std::flush;
  });
  if (showProgress) streams.err << "\n";
  streams.out << summary.render();
  if (const std::int64_t open = summary.holesOpen(); open > 0) {
    streams.err << "idemctl simulate: " << open
                << " careless attempt(s) went through: this database does not enforce schema "
                   "contract v2 (run idemctl migrate)\n";
    return kFailed;
  }
  return kOk;
}

}  // namespace idem::ctl

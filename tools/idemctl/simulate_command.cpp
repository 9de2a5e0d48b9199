#include <iomanip>
#include <ostream>
#include <sstream>

#include "database_flags.hpp"
#include "idemctl.hpp"
#include "simulator.hpp"

namespace idem::ctl {
namespace {

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
     "operations whose client tries the holes the schema closes, on a login granted only "
     "idem_writer (the demo: 0.05)"},
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

int runSimulate(const std::vector<std::string>& args, Streams streams,
                const std::atomic<bool>& stop) {
  sim::SimulationConfig config;
  std::optional<std::string> dsn, runId, operatorDsn, reconcilerDsn, ledgerDsn, journal;
  std::optional<std::string> gatewayReports, statementOut, statementFormat, gatewayTruth;
  bool quiet = false;
  CommandLine cli("idemctl simulate", "idemctl simulate [flags]");
  cli.integer("agents", "N", "concurrent agents, one connection each", config.agents, 1, 256);
  cli.integer("seed", "N", "seed: the same seed plans the same traffic", config.seed, 0, INT64_MAX);
  cli.integer("requests", "N", "business operations to run; 0 = no bound", config.operations, 0,
              INT64_MAX);
  cli.duration("duration", "stop after this long, e.g. 10m; 0 = no bound", config.duration);
  cli.number("rate", "OPS/S", "operations per second across all agents; 0 = flat out",
             config.operationsPerSecond, 0, 1e6);
  cli.list("biz-types", "LIST", "comma-separated business types", config.bizTypes);
  cli.text("run-id", "TEXT", "prefix for keys and business ids (default: seed and start time)",
           runId);
  cli.duration("lease", "lease given to each claim", config.lease);
  cli.duration("expire-leases-every", "run idem.expire_leases() this often; 0 = never",
               config.expireLeasesEvery);
  cli.duration("settle-every",
               "an operator settles this run's stuck records this often: SUCCESS where the "
               "ledger or the downstream shows the side effect, FAILED where neither does; "
               "0 = never",
               config.settleEvery);
  cli.flag("settle-until-done",
           "with --settle-every: after the agents stop, go on settling (and expiring leases and "
           "reconciling) until none of this run's records is PROCESSING or UNKNOWN: through a "
           "lease, then while they keep falling (three rounds, at least 1s, without one settled "
           "end it)",
           config.settleUntilDone);
  cli.duration("reconcile-every", "run idem.reconcile() this often; 0 = never",
               config.reconcileEvery);
  cli.text("operator-dsn", "DSN", "the operator's login, an idem_operator (default: --db.dsn)",
           operatorDsn);
  cli.duration("gateway-report-every",
               "the gateway reports what it did to the ledger this often, whether or not the "
               "agent heard back (its callbacks and statement); 0 = never",
               config.gatewayReportEvery);
  cli.text("ledger-dsn", "DSN", "the gateway's login, an idem_ledger (default: --db.dsn)",
           ledgerDsn);
  cli.text("downstream-journal", "FILE",
           "the downstream's own record of every side effect, appended as it acts and read back "
           "by a restarted simulation (default: kept in memory)",
           journal);
  cli.text("gateway-reports", "HOW",
           "ledger: every movement as a ledger line (default); callbacks: only "
           "--gateway-callback-share of them, as webhook events (some twice, out of order), the "
           "rest only in the day's statement or a status lookup, as production knows it",
           gatewayReports);
  cli.number("gateway-callback-share", "P",
             "with --gateway-reports callbacks: the share of movements called back",
             config.gatewayCallbackShare, 0.0, 1.0);
  cli.number("gateway-callback-repeat-rate", "P", "callbacks delivered twice",
             config.gatewayCallbackRepeatRate, 0.0, 1.0);
  cli.text("gateway-name", "NAME", "the gateway its callbacks and statement name",
           config.gatewayName);
  cli.text("statement-out", "FILE",
           "when the run ends, write the gateway's statement of every money movement here",
           statementOut);
  cli.duration("statement-every",
               "also rewrite --statement-out this often, each file the day so far; 0 = at the end",
               config.statementEvery);
  cli.text("statement-format", "F", "the statement's format: stripe (default), adyen, camt.053",
           statementFormat);
  cli.text("gateway-truth", "FILE",
           "append what the gateway did, as JSON lines, for its status API "
           "(idemwatch-gateway-standin --truth)",
           gatewayTruth);
  cli.text("reconciler-dsn", "DSN",
           "the reconciler's login, an idem_reconciler (default: --db.dsn)", reconcilerDsn);
  cli.duration("downstream-latency", "how long each downstream call takes",
               config.downstreamLatency);
  cli.integer("concurrent-copies", "N", "copies of a concurrently duplicated request",
              config.concurrentCopies, 2, 64);
  cli.text("through-proxy", "URL",
           "send the agents' requests through idemwatch-proxy at http://HOST:PORT (routes named "
           "after the tools, POST /TOOL/BIZ_ID, forwarding to --tool-listen)",
           config.throughProxy);
  cli.text("tool-listen", "HOST:PORT",
           "with --through-proxy: where the downstream answers as the proxy's HTTP upstream",
           config.toolListen);
  cli.flag("quiet", "no progress line", quiet);
  declareDsn(cli, dsn);
  for (const RateFlag& r : kRates) cli.number(r.name, "P", r.help, config.*(r.field), 0.0, 1.0);
  if (!cli.parse(args, streams.out)) return kOk;

  config.connection = connectionFrom(dsn, "idemctl simulate");
  if (operatorDsn)
    config.operatorConnection = connectionFrom(operatorDsn, "idemctl simulate (operator)");
  if (ledgerDsn) config.ledgerConnection = connectionFrom(ledgerDsn, "idemctl simulate (ledger)");
  if (journal) config.downstreamJournal = *journal;
  if (gatewayReports) {
    if (*gatewayReports == "ledger") {
      config.gatewayReports = sim::GatewayReports::Ledger;
    } else if (*gatewayReports == "callbacks") {
      config.gatewayReports = sim::GatewayReports::Callbacks;
    } else {
      throw UsageError("--gateway-reports must be ledger or callbacks, got '" + *gatewayReports +
                       "'");
    }
  }
  if (statementOut) config.statementOut = *statementOut;
  if (statementFormat) {
    const auto f = statementFormatFromName(*statementFormat);
    if (!f || (*f != StatementFormat::StripeItemized && *f != StatementFormat::AdyenSettlement &&
               *f != StatementFormat::Camt053)) {
      throw UsageError("--statement-format must be stripe, adyen or camt.053, got '" +
                       *statementFormat + "'");
    }
    config.statementFormat = *f;
  }
  if (gatewayTruth) config.gatewayTruth = *gatewayTruth;
  if (reconcilerDsn) {
    config.reconcilerConnection = connectionFrom(reconcilerDsn, "idemctl simulate (reconciler)");
  }
  if (!runId) {
    // Streamed, not "s" + std::to_string(...): GCC 12 at -O3 sees a -Wrestrict overlap in the
    // inlined operator+ that is not there, and the Release build has -Werror.
    std::ostringstream id;
    id << 's' << config.seed << '-'
       << std::chrono::duration_cast<std::chrono::seconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
    runId = id.str();
  }
  config.runId = *runId;
  if (const auto problems = config.validate(); !problems.empty())
    throw UsageError(problems.front());

  const bool showProgress = streams.interactive && !quiet;
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
                   "contract v3 (run idemctl migrate)\n";
    return kFailed;
  }
  return kOk;
}

[[maybe_unused]] const bool registered =
    registerCommand({.name = "simulate",
                     .summary = "run simulated agent traffic through the protocol",
                     .order = 20,
                     .run = runSimulate});

}  // namespace

}  // namespace idem::ctl

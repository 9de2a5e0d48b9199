// `idemctl reconcile`: the reconciliation fuse of the seeds, run from cron or as a service. Each
// round calls idem.reconcile(), which resolves to SUCCESS every stuck record whose own key has a
// flow of its side effect, then idem.resolve_from_gateway_evidence(), which decides from what the
// gateway said (a statement line or callback that arrived during a live lease; the silence of
// final statements, for a gateway that allows it), and prints what it resolved. Without such a
// gateway it never decides FAILED: that takes a person.
//
// With --lookup CONFIG each round then asks the gateway's status endpoint about the UNKNOWN
// records (gateway_lookup.hpp) and records each answer through a login granted idem_ledger
// (--ledger-dsn): the gateway's "it happened" resolves SUCCESS, its "it did not" FAILED.
#include <cstdlib>
#include <ctime>
#include <ostream>
#include <pqxx/pqxx>
#include <thread>

#include "database_flags.hpp"
#include "gateway_lookup.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "idem/session_role.hpp"
#include "idemctl.hpp"

namespace idem::ctl {
namespace {

constexpr const char* kReconcile = "SELECT idem.reconcile()";
constexpr const char* kGatewayEvidence =
    "SELECT resolved_success, resolved_failed FROM idem.resolve_from_gateway_evidence()";

// The records this round resolved: transitions written by this very transaction (its xid), which
// began no earlier than now(), so the BRIN index on created_at keeps the scan to the newest rows.
constexpr const char* kResolvedKeys =
    "SELECT idempotency_key, from_status, to_status FROM idem.transitions "
    "WHERE created_at >= now() AND actor_kind = 'reconciler' "
    "AND xmin::text::bigint = pg_current_xact_id()::text::bigint % 4294967296 "
    "ORDER BY id LIMIT $1";

// Keys named per round; the count is always exact.
constexpr int kKeysShown = 20;

std::string nowUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

struct Round {
  int resolved = 0;               // to SUCCESS
  int failed = 0;                 // to FAILED, from the silence of final statements
  std::vector<std::string> keys;  // "KEY (from UNKNOWN)"
};

Round reconcileOnce(pqxx::connection& connection) {
  return translatingErrors("reconcile", [&] {
    Work tx(connection);
    Round out;
    out.resolved = tx.exec1(kReconcile)[0].as<int>();
    const pqxx::row gateway = tx.exec1(kGatewayEvidence);
    out.resolved += gateway[0].as<int>();
    out.failed = gateway[1].as<int>();
    if (out.resolved + out.failed > 0) {
      for (const pqxx::row& r : tx.exec_params(kResolvedKeys, kKeysShown)) {
        const std::string to = r[2].c_str();
        out.keys.push_back(std::string(r[0].c_str()) + " (from " + r[1].c_str() +
                           (to == "SUCCESS" ? "" : " to " + to) + ")");
      }
    }
    tx.commit();
    return out;
  });
}

void print(std::ostream& out, const Round& round) {
  out << nowUtc() << " reconcile: resolved " << round.resolved << " record(s) to SUCCESS";
  if (round.failed > 0) out << " and " << round.failed << " to FAILED";
  for (std::size_t i = 0; i < round.keys.size(); ++i)
    out << (i == 0 ? ": " : ", ") << round.keys[i];
  const int total = round.resolved + round.failed;
  if (total > static_cast<int>(round.keys.size())) {
    out << (round.keys.empty() ? "" : ", ") << "and " << total - static_cast<int>(round.keys.size())
        << " more";
  }
  out << "\n" << std::flush;
}

// A login that cannot run idem.reconcile() is said so before the first round, not as a
// "permission denied" from inside the loop.
void requireReconciler(pqxx::connection& connection) {
  const SessionRole session = sessionMembership(connection, "idem_reconciler", "reconcile");
  if (!session.member) {
    throw DatabaseError("42501", "reconcile: the login " + session.login +
                                     " is not a member of idem_reconciler; run it as a login "
                                     "granted idem_reconciler");
  }
}

void requireLedger(pqxx::connection& connection) {
  const SessionRole session = sessionMembership(connection, "idem_ledger", "reconcile --lookup");
  if (!session.member) {
    throw DatabaseError("42501", "reconcile --lookup: the --ledger-dsn login " + session.login +
                                     " is not a member of idem_ledger; the gateway's answers are "
                                     "recorded by a login granted idem_ledger");
  }
}

// The lookup half of a round: its own connection to the ledger, reopened after a failure.
struct Lookup {
  std::unique_ptr<GatewayLookup> gateway;
  ConnectionSettings ledgerSettings;
  std::unique_ptr<pqxx::connection> ledger;

  void round(pqxx::connection& reader, std::ostream& out, const std::atomic<bool>& stop) {
    if (!ledger) ledger = connect(ledgerSettings);
    try {
      printLookupRound(out, nowUtc(), gateway->runRound(reader, *ledger, stop));
    } catch (const DatabaseError&) {
      ledger.reset();
      throw;
    }
  }
};

// Sleeps up to `d`, waking early when asked to stop.
void sleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        until - std::chrono::steady_clock::now(), std::chrono::milliseconds(100)));
  }
}

int runReconcile(const std::vector<std::string>& args, Streams streams,
                 const std::atomic<bool>& stop) {
  std::optional<std::string> dsn;
  std::optional<std::string> lookupConfig, ledgerDsn;
  std::optional<std::chrono::milliseconds> every;
  CommandLine cli(
      "idemctl reconcile",
      "idemctl reconcile [--every 1m] [--lookup CONFIG --ledger-dsn DSN] [flags]",
      "Runs as a login granted idem_reconciler. Each round prints how many records it "
      "resolved\nand their keys. With --every, a failed round is reported and the next "
      "one reconnects.\n"
      "\n"
      "Gateway lookup: with --lookup CONFIG each round then asks the gateway's status endpoint\n"
      "about the UNKNOWN records of the configured business types (those not asked yet first,\n"
      "then the oldest; at most max_per_round), never calling the gateway to act, and records\n"
      "each answer through the --ledger-dsn login (granted idem_ledger): \"it happened\" with\n"
      "the request's amount resolves SUCCESS, \"it did not\" resolves FAILED, another amount is\n"
      "mismatched (a person decides), and an answer that does not know, an error or a timeout\n"
      "decides nothing. CONFIG is YAML: the url, headers with ${credential:NAME} read from\n"
      "credentials_dir (systemd's LoadCredential=), timeout, rate_limit, retries, ca_file, and\n"
      "where the answer holds its status, amount, currency and reference (docs/lookup.md).\n"
      "It prints one line per round: asked, succeeded, failed, unknown, errors; resolved\n"
      "SUCCESS, FAILED, mismatched.\n"
      "\n"
      "Exit codes: 0 done (or stopped by a signal), 1 failed (once: "
      "any error; --every: the\nfirst connection), 2 usage (a mistake in CONFIG names its file "
      "and line).");
  cli.duration("every",
               "run a round this often until SIGINT or SIGTERM, e.g. 1m (default: one round, then "
               "exit)",
               every);
  cli.text("lookup", "CONFIG",
           "ask the gateway's status endpoint about the UNKNOWN records each round (YAML, "
           "docs/lookup.md)",
           lookupConfig);
  cli.text("ledger-dsn", "DSN",
           "with --lookup: the login granted idem_ledger that records the gateway's answers "
           "(default: IDEMWATCH_LEDGER_DSN)",
           ledgerDsn);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  if (every && every->count() <= 0) throw UsageError("--every must be positive, e.g. 1m");
  if (ledgerDsn && !lookupConfig) throw UsageError("--ledger-dsn is for --lookup");
  std::optional<Lookup> lookup;
  if (lookupConfig) {
    // From the environment, as IDEMWATCH_DSN: a password in it stays out of `ps`.
    if (const char* env = std::getenv("IDEMWATCH_LEDGER_DSN"); !ledgerDsn && env && *env) {
      ledgerDsn = env;
    }
    if (!ledgerDsn) {
      throw UsageError(
          "--lookup needs --ledger-dsn (or IDEMWATCH_LEDGER_DSN): the answers are recorded by "
          "a login granted idem_ledger");
    }
    lookup.emplace();
    lookup->gateway = std::make_unique<GatewayLookup>(loadLookupConfig(*lookupConfig));
    lookup->ledgerSettings = connectionFrom(ledgerDsn, "idemctl reconcile --lookup");
  }

  const ConnectionSettings settings = connectionFrom(dsn, "idemctl reconcile");
  auto connection = connect(settings);
  requireReconciler(*connection);
  if (lookup) {
    lookup->ledger = connect(lookup->ledgerSettings);
    requireLedger(*lookup->ledger);
  }
  if (!every) {
    print(streams.out, reconcileOnce(*connection));
    if (lookup) lookup->round(*connection, streams.out, stop);
    return kOk;
  }

  streams.out << nowUtc() << " reconcile: a round every " << formatDuration(*every)
              << " until SIGINT or SIGTERM\n"
              << std::flush;
  while (!stop.load()) {
    try {
      if (!connection) connection = connect(settings);
      print(streams.out, reconcileOnce(*connection));
      if (lookup) lookup->round(*connection, streams.out, stop);
    } catch (const DatabaseError& e) {
      // A service outlives a database restart: say so, and reconnect next round.
      streams.err << nowUtc() << " idemctl reconcile: " << e.what() << "\n" << std::flush;
      connection.reset();
    }
    sleepUnlessStopped(*every, stop);
  }
  streams.out << nowUtc() << " reconcile: stopped\n";
  return kOk;
}

[[maybe_unused]] const bool registered = registerCommand(
    {.name = "reconcile",
     .summary = "resolve the stuck records the ledger or the gateway's word decides,\n"
                "once or every --every (reconcilers)",
     .order = 40,
     .run = runReconcile});

}  // namespace

}  // namespace idem::ctl

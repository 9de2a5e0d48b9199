// Maintenance a deployment schedules: the lease sweep and retention.
#include <ostream>

#include "database_flags.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "idem/lock_holders.hpp"
#include "idem/protocol_client.hpp"
#include "idemctl.hpp"

namespace idem::ctl {
namespace {

int runExpireLeases(const std::vector<std::string>& args, Streams streams,
                    const std::atomic<bool>& /*stop*/) {
  std::optional<std::string> dsn;
  CommandLine cli("idemctl expire-leases", "idemctl expire-leases [flags]");
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  auto connection = connect(connectionFrom(dsn, "idemctl expire-leases"));
  const int n = ProtocolClient(*connection).expireLeases();
  streams.out << n << " record(s) past their lease are now UNKNOWN\n";
  return kOk;
}

int runPurge(const std::vector<std::string>& args, Streams streams,
             const std::atomic<bool>& /*stop*/) {
  std::optional<std::chrono::milliseconds> age;
  std::optional<std::string> dsn;
  CommandLine cli("idemctl purge", "idemctl purge --older-than 30d [flags]",
                  "Retention, run as the schema's owner. Each removed record leaves a tombstone of "
                  "its key in\nidem.retired_keys: a later begin under the key is `retired`, a new "
                  "key for a paid business\nobject `rejected`. PROCESSING and UNKNOWN records and "
                  "their history are never removed; fund\nflows are the ledger and are kept.");
  cli.duration("older-than", "age of the SUCCESS and FAILED records to remove, e.g. 30d (required)",
               age);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  if (!age || age->count() <= 0) throw UsageError("--older-than is required and must be positive");
  auto connection = connect(connectionFrom(dsn, "idemctl purge"));
  PurgeResult r;
  try {
    r = ProtocolClient(*connection).purge(*age);
  } catch (const DatabaseError& e) {
    if (e.sqlstate() != "55P03") throw;
    // idem.purge waits at most its lock_timeout for the claims in flight, then stops.
    throw DatabaseError(e.sqlstate(),
                        "idemctl purge: retention waited too long for a lock held by " +
                            describeLockHolders(*connection) +
                            "; nothing was removed. End that transaction and run "
                            "purge again");
  }
  streams.out << "purged rows older than " << formatDuration(*age) << ": " << r.records
              << " records, " << r.attempts << " attempts, " << r.transitions << " transitions; "
              << r.tombstones
              << " tombstones written (idem.retired_keys: those keys can never run again)\n";
  return kOk;
}

[[maybe_unused]] const bool expireLeasesRegistered =
    registerCommand({.name = "expire-leases",
                     .summary = "turn PROCESSING records past their lease into UNKNOWN",
                     .order = 50,
                     .run = runExpireLeases});
[[maybe_unused]] const bool purgeRegistered = registerCommand(
    {.name = "purge",
     .summary = "delete settled records older than a given age, leaving tombstones\n"
                "of their keys",
     .order = 60,
     .run = runPurge});

}  // namespace

}  // namespace idem::ctl

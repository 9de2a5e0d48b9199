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

// Retention in parts: the records a batch at a time, each batch a transaction of its own, then
// the history's days in one more. No transaction holds writers longer than its own part.
PurgeResult purgeInBatches(ProtocolClient& client, std::chrono::milliseconds age, int batch,
                           std::ostream& progress, const std::atomic<bool>& stop) {
  PurgeResult total;
  std::optional<std::string> from;
  for (int round = 1;; ++round) {
    const PurgeResult r = client.purgeRecords(age, batch, from);
    total.records += r.records;
    total.tombstones += r.tombstones;
    from = r.nextFrom;
    if (r.records < batch) break;
    if (round % 100 == 0) progress << "  " << total.records << " records so far\n" << std::flush;
    if (stop) {
      progress << "stopped after " << total.records
               << " records; their tombstones are written. The history was not touched: run "
                  "purge again\n";
      return total;
    }
  }
  const PurgeResult h = client.purgeHistory(age);
  total.attempts = h.attempts;
  total.transitions = h.transitions;
  return total;
}

int runPurge(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop) {
  std::optional<std::chrono::milliseconds> age;
  std::optional<std::string> dsn;
  int batch = 10'000;
  CommandLine cli("idemctl purge", "idemctl purge --older-than 30d [flags]",
                  "Retention, run as the schema's owner. Each removed record leaves a tombstone of "
                  "its key in\nidem.retired_keys: a later begin under the key is `retired`, a new "
                  "key for a paid business\nobject `rejected`. PROCESSING and UNKNOWN records and "
                  "their history are never removed; fund\nflows are the ledger and are kept. The "
                  "records go a batch at a time, each batch its own\ntransaction, then the "
                  "history's whole days in one more: writers are held for a batch at\nmost.");
  cli.duration("older-than", "age of the SUCCESS and FAILED records to remove, e.g. 30d (required)",
               age);
  cli.integer("batch", "N",
              "records removed per transaction; 0: everything in one transaction (idem.purge)",
              batch, 0, 1'000'000);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  if (!age || age->count() <= 0) throw UsageError("--older-than is required and must be positive");
  auto connection = connect(connectionFrom(dsn, "idemctl purge"));
  ProtocolClient client(*connection);
  PurgeResult r;
  try {
    r = batch == 0 ? client.purge(*age) : purgeInBatches(client, *age, batch, streams.out, stop);
  } catch (const DatabaseError& e) {
    if (e.sqlstate() != "55P03") throw;
    // Retention waits at most its lock_timeout for the claims in flight, then stops.
    throw DatabaseError(e.sqlstate(),
                        "idemctl purge: retention waited too long for a lock held by " +
                            describeLockHolders(*connection) +
                            (batch == 0 ? "; nothing was removed"
                                        : "; the batches before it are removed, this one is not") +
                            ". End that transaction and run purge again");
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

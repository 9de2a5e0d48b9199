// Schema migrations: the numbered files of sql/, applied in order, each recorded with its checksum
// in idem.schema_migrations. Re-running is a no-op; an applied migration whose text changed is
// refused, because the database would no longer match what the file says it is.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <pqxx/connection>
#include <pqxx/transaction_base>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem {

struct Migration {
  int version = 0;
  std::string name;  // the file name, e.g. "003_protocol.sql"
  std::string sql;
};

// The migrations compiled into this binary from sql/.
const std::vector<Migration>& bundledMigrations();

// Reads NNN_*.sql files from a folder, in order. Throws MigrationError for a missing folder, a
// duplicate number or an unreadable file.
std::vector<Migration> loadMigrations(const std::filesystem::path& folder);

class MigrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MigrationReport {
  std::vector<std::string> applied;  // names applied by this run
  int alreadyApplied = 0;
};

struct MigrateOptions {
  // Apply only the migrations numbered up to this version (e.g. 5: a version-1 schema, to build
  // the database an upgrade test then migrates to version 2). Empty: all of them.
  std::optional<int> upTo;
  // How long one attempt waits for any lock (lock_timeout, for its transaction alone): the agents'
  // calls queue behind a migration's lock request, so it never holds them longer than this.
  std::chrono::milliseconds lockTimeout{2000};
  // How long migrate keeps trying, with a growing pause between attempts, before it gives up.
  std::chrono::milliseconds lockWait{std::chrono::minutes(5)};
  // Told each time an attempt gave up on a lock: what it waited for and who holds it.
  std::function<void(const std::string&)> onWait{};
};

// Applies what is missing, all in one transaction under an advisory lock, so concurrent runs
// serialise and a failure leaves the database as it was. A lock it cannot get within
// options.lockTimeout (an idle reader's transaction on a table it alters) ends the attempt, which
// is tried again after a pause, until options.lockWait: then MigrationError names the sessions
// that held the locks. Throws MigrationError when an applied
// migration's checksum differs from the given text, or when the database has migrations this list
// does not know (it is newer than this program); DatabaseError when a migration fails.
//
// Once the schema is at version 2 (kContractV2Migration applied), it then compares every idem
// function's EXECUTE grants with the contract's table (expectedFunctionGrants) and throws
// MigrationError naming the function and the grantee that differ; the transaction, with whatever
// this run applied, is rolled back.
MigrationReport migrate(pqxx::connection& connection, const std::vector<Migration>& migrations,
                        const MigrateOptions& options = {});

// The migration from which the database carries schema contract version 2 and its grants.
inline constexpr int kContractV2Migration = 9;
// The migration from which it carries version 3: side effects per business type, the ledger's two
// writers.
inline constexpr int kContractV3Migration = 14;

// One EXECUTE grant the contract allows: a function (as regprocedure prints it, e.g.
// "idem.expire_leases()") and a role. Every other grant on an idem function is a hole.
struct FunctionGrant {
  std::string function;
  std::string grantee;
  // The migration that creates the grant: a database migrated only up to an earlier one (idemctl
  // migrate --up-to) is not told it lacks it.
  int since = kContractV2Migration;
  // The migration that takes it away again (a later contract's); the grant holds before it.
  int until = std::numeric_limits<int>::max();
};

// The contract's role table (docs/contract/schema.md, "Roles"), the one place it is written down.
const std::vector<FunctionGrant>& expectedFunctionGrants();

// What differs between the database's EXECUTE grants on idem functions and the contract's table,
// one sentence each ("idem.purge(interval) is executable by PUBLIC, which the contract does not
// allow"); empty when they agree. The owner's own privilege is not a grant.
std::vector<std::string> functionGrantDifferences(pqxx::transaction_base& tx);

}  // namespace idem

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

// The migrations compiled into this binary from sql/migrations/.
const std::vector<Migration>& bundledMigrations();

// A function, view, trigger or vocabulary domain check as the schema defines it today:
// sql/objects/KIND/NAME.sql, its CREATE OR REPLACE statement and its COMMENT, written as the object
// is. migrate re-applies one whenever its text differs from the one recorded in
// idem.schema_objects, so the live definition of idem.begin is read and changed in
// sql/objects/functions/begin.sql, never restated in a new migration. Only what CREATE OR REPLACE
// can do belongs there: a changed signature, a dropped column or a removed object is a numbered
// migration's work.
struct SchemaObject {
  std::string name;  // its path under sql/objects/, e.g. "functions/begin.sql"
  std::string sql;
};

// The objects of one schema version, in the order they are applied: functions, views, triggers.
struct SchemaObjects {
  // The migration the objects are written for: they are applied once the database has it, never
  // to a database migrated only part of the way (--up-to), whose tables they may not match.
  int version = 0;
  std::vector<SchemaObject> objects;
};

// The objects compiled into this binary from sql/objects/, for its newest migration.
const SchemaObjects& bundledObjects();

// What an empty database gets instead of every numbered migration (Flyway's baseline): the tables
// and all on them as migration `version` leaves them, then the objects, then their owners and
// grants. scripts/make-baseline writes both files from a database built through the migrations.
struct Baseline {
  int version = 0;         // 0: none
  std::string tablesName;  // "014_tables.sql"
  std::string tables;
  std::string grantsName;  // "014_grants.sql"
  std::string grants;
};

// The baseline compiled into this binary from sql/baseline/.
const Baseline& bundledBaseline();

// Reads NNN_*.sql files from a folder (or from its migrations/ folder, for a tree laid out as
// sql/ is), in order. Throws MigrationError for a missing folder, a duplicate number or an
// unreadable file.
std::vector<Migration> loadMigrations(const std::filesystem::path& folder);

// Reads FOLDER/objects/{domains,functions,views,triggers}/*.sql, for the newest migration of
// FOLDER/migrations. A folder without objects/ (numbered files alone) has none.
SchemaObjects loadObjects(const std::filesystem::path& folder);

// Reads the newest FOLDER/baseline/NNN_tables.sql and NNN_grants.sql; version 0 when there is none.
Baseline loadBaseline(const std::filesystem::path& folder);

class MigrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MigrationReport {
  std::vector<std::string> applied;  // names applied by this run
  int alreadyApplied = 0;
  std::vector<std::string> reapplied;  // objects re-applied by this run (changed or new)
  int objectsUnchanged = 0;
  // The baseline file an empty database was installed from ("" when none was): `applied` then
  // names the migrations it stands for, recorded as applied.
  std::string baseline;
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
  // The functions, views and triggers to keep current; nullptr: the migrations alone (the schema
  // as the released migrations left it, which the objects must reproduce exactly).
  const SchemaObjects* objects = &bundledObjects();
  // For an empty database: installed in one step when it is at the newest migration given (and the
  // objects are for that version), instead of every migration; nullptr: always every migration.
  const Baseline* baseline = &bundledBaseline();
};

// Applies what is missing, all in one transaction under an advisory lock, so concurrent runs
// serialise and a failure leaves the database as it was. A lock it cannot get within
// options.lockTimeout (an idle reader's transaction on a table it alters) ends the attempt, which
// is tried again after a pause, until options.lockWait: then MigrationError names the sessions
// that held the locks. Throws MigrationError when an applied
// migration's checksum differs from the given text, or when the database has migrations this list
// does not know (it is newer than this program); DatabaseError when a migration fails.
//
// An empty database (nothing recorded) is installed from options.baseline when it is at the
// newest migration of the list and no --up-to stops short of it: its tables, the objects, their
// grants, and every migration it stands for recorded with its checksum, as if applied.
//
// Then, once the database has options.objects->version, in the same transaction: every object
// whose text differs from the one recorded in idem.schema_objects (or that has none recorded) is
// applied, in order, and recorded (MigrationReport::reapplied); one that fails names its file and
// nothing of the run is kept.
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
// The migration that brought the gateway's evidence: statements, callbacks, status answers.
inline constexpr int kGatewayEvidenceMigration = 15;

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
  // The function is defined by sql/objects/ alone, not by a numbered migration: a database built
  // from the numbered files alone (scripts/make-baseline) is not told it lacks it.
  bool objectOnly = false;
};

// The contract's role table (docs/contract/schema.md, "Roles"), the one place it is written down.
const std::vector<FunctionGrant>& expectedFunctionGrants();

// What differs between the database's EXECUTE grants on idem functions and the contract's table,
// one sentence each ("idem.purge(interval) is executable by PUBLIC, which the contract does not
// allow"); empty when they agree. The owner's own privilege is not a grant.
std::vector<std::string> functionGrantDifferences(pqxx::transaction_base& tx);

}  // namespace idem

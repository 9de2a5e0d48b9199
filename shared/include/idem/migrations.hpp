// Schema migrations: the numbered files of sql/, applied in order, each recorded with its checksum
// in idem.schema_migrations. Re-running is a no-op; an applied migration whose text changed is
// refused, because the database would no longer match what the file says it is.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <pqxx/connection>
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

// Applies what is missing, all in one transaction under an advisory lock, so concurrent runs
// serialise and a failure leaves the database as it was. Throws MigrationError when an applied
// migration's checksum differs from the given text, or when the database has migrations this list
// does not know (it is newer than this program); DatabaseError when a migration fails.
MigrationReport migrate(pqxx::connection& connection, const std::vector<Migration>& migrations);

}  // namespace idem

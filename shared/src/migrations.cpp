#include "idem/migrations.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <pqxx/connection>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <sstream>

#include "idem/database_error.hpp"

namespace idem {
namespace {

constexpr const char* kBootstrap = R"SQL(
CREATE SCHEMA IF NOT EXISTS idem;
CREATE TABLE IF NOT EXISTS idem.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text        NOT NULL DEFAULT session_user
);
)SQL";

// Any fixed number: all idemwatch migrators take the same transaction-scoped lock.
constexpr const char* kLock = "SELECT pg_advisory_xact_lock(7347261900531)";

}  // namespace

std::vector<Migration> loadMigrations(const std::filesystem::path& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw MigrationError("migrations folder " + folder.string() + " does not exist");
  }
  static const std::regex pattern(R"(([0-9]{3})_[A-Za-z0-9_]+\.sql)");
  std::vector<Migration> out;
  std::set<int> seen;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!entry.is_regular_file() || !std::regex_match(name, m, pattern)) continue;
    const int version = std::stoi(m[1].str());
    if (!seen.insert(version).second) {
      throw MigrationError("two migration files share the number " + m[1].str() + " in " +
                           folder.string());
    }
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in) throw MigrationError("cannot read migration " + entry.path().string());
    std::ostringstream text;
    text << in.rdbuf();
    out.push_back({version, name, text.str()});
  }
  std::sort(out.begin(), out.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  if (out.empty()) throw MigrationError("no NNN_*.sql migrations in " + folder.string());
  return out;
}

MigrationReport migrate(pqxx::connection& connection, const std::vector<Migration>& migrations) {
  return translatingErrors("migrate", [&] {
    MigrationReport report;
    pqxx::work tx(connection);
    tx.exec(kLock);
    tx.exec(kBootstrap);

    struct Applied {
      std::string name;
      std::string checksum;
    };
    std::map<int, Applied> applied;
    for (const auto& row : tx.exec("SELECT version, name, checksum FROM idem.schema_migrations")) {
      applied[row[0].as<int>()] = {row[1].c_str(), row[2].c_str()};
    }

    std::set<int> known;
    for (const Migration& m : migrations) {
      known.insert(m.version);
      const std::string checksum =
          tx.exec_params1("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", m.sql)[0]
              .c_str();
      if (auto it = applied.find(m.version); it != applied.end()) {
        if (it->second.checksum != checksum) {
          throw MigrationError("migration " + m.name + " was applied with checksum " +
                               it->second.checksum.substr(0, 12) + "… but the file now has " +
                               checksum.substr(0, 12) +
                               "…: applied migrations must never change; add a new numbered "
                               "migration instead");
        }
        ++report.alreadyApplied;
        continue;
      }
      try {
        tx.exec(m.sql);
      } catch (const pqxx::sql_error& e) {
        throw DatabaseError(e.sqlstate(), "migrate: " + m.name + " failed: " +
                                              primaryMessage(e.what()));
      }
      tx.exec_params("INSERT INTO idem.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                     m.version, m.name, checksum);
      report.applied.push_back(m.name);
    }
    for (const auto& [version, entry] : applied) {
      if (!known.contains(version)) {
        throw MigrationError("the database has migration " + entry.name +
                             ", which this program does not know: it is older than the schema; "
                             "use a newer idemctl");
      }
    }
    tx.commit();
    return report;
  });
}

}  // namespace idem

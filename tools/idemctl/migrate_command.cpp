#include <ostream>
#include <pqxx/pqxx>

#include "database_flags.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "idemctl.hpp"

namespace idem::ctl {
namespace {

// The newest migration applied, 0 for a database idemwatch never migrated.
int schemaVersion(pqxx::connection& connection) {
  return translatingErrors("migrate", [&] {
    ReadTransaction tx(connection);
    if (tx.exec1("SELECT to_regclass('idem.schema_migrations') IS NULL")[0].as<bool>()) return 0;
    return tx.exec1("SELECT coalesce(max(version), 0) FROM idem.schema_migrations")[0].as<int>();
  });
}

std::string describeVersion(int version) {
  if (version == 0) return "an empty database";
  const char* contract = version >= kContractV3Migration   ? "3"
                         : version >= kContractV2Migration ? "2"
                                                           : "1";
  return "version " + std::to_string(version) + " (schema contract v" + contract + ")";
}

int runMigrate(const std::vector<std::string>& args, Streams streams,
               const std::atomic<bool>& /*stop*/) {
  std::optional<std::string> dsn, sqlDir;
  std::optional<int> upTo;
  CommandLine cli("idemctl migrate", "idemctl migrate [flags]",
                  "Upgrades a database of any earlier version in place, with its data. Once the "
                  "schema is at\ncontract version 2, every idem function's EXECUTE grants are "
                  "compared with the contract's\nrole table; any difference fails the run and "
                  "nothing is applied.");
  declareDsn(cli, dsn);
  cli.text("sql-dir", "DIR",
           "apply DIR/migrations/NNN_*.sql and DIR/objects/ (a tree laid out as sql/ is) instead "
           "of the bundled ones",
           sqlDir);
  cli.integer("up-to", "N",
              "apply only the migrations numbered up to N (e.g. 5: a version-1 schema, for "
              "upgrade tests)",
              upTo, 1, 999);
  MigrateOptions options;
  cli.duration("lock-timeout",
               "how long one attempt waits for a lock (the agents' calls queue behind it no "
               "longer)",
               options.lockTimeout);
  cli.duration("lock-wait", "how long to keep trying while a lock is held, then give up",
               options.lockWait);
  if (!cli.parse(args, streams.out)) return kOk;

  const std::vector<Migration> migrations = sqlDir ? loadMigrations(*sqlDir) : bundledMigrations();
  const SchemaObjects objects = sqlDir ? loadObjects(*sqlDir) : bundledObjects();
  const Baseline baseline = sqlDir ? loadBaseline(*sqlDir) : bundledBaseline();
  options.objects = &objects;
  options.baseline = &baseline;
  if (upTo) options.upTo = *upTo;
  options.onWait = [&streams](const std::string& line) { streams.err << line << "\n"; };
  auto connection = connect(connectionFrom(dsn, "idemctl migrate"));
  const int before = schemaVersion(*connection);
  const MigrationReport report = migrate(*connection, migrations, options);
  const int after = schemaVersion(*connection);
  if (!report.baseline.empty()) {
    streams.out << "installed from sql/baseline/" << report.baseline << " (standing for "
                << report.applied.size() << " migrations, recorded as applied)\n";
  } else {
    for (const std::string& name : report.applied) streams.out << "applied " << name << "\n";
  }
  for (const std::string& name : report.reapplied)
    streams.out << "re-applied sql/objects/" << name << "\n";
  if (report.applied.empty()) {
    streams.out << "schema up to date at " << describeVersion(after) << " ("
                << report.alreadyApplied << " already applied)\n";
  } else {
    streams.out << (before == 0 ? "installed "
                                : "upgraded from " + describeVersion(before) + " to ")
                << describeVersion(after) << " (" << report.applied.size() << " applied, "
                << report.alreadyApplied << " already applied)\n";
  }
  if (!objects.objects.empty()) {
    streams.out << "objects: " << report.reapplied.size() << " re-applied, "
                << report.objectsUnchanged << " unchanged";
    if (after < objects.version)
      streams.out << " (not applied below version " << objects.version << ")";
    streams.out << "\n";
  }
  if (after >= kContractV2Migration) {
    // migrate() refused the run had they differed; say what was checked.
    streams.out << "grants: every idem function's EXECUTE grants match the contract's role table ("
                << expectedFunctionGrants().size()
                << " grants, nothing executable by PUBLIC, every function owned by idem_owner)\n";
  } else {
    streams.out << "grants: not checked below version " << kContractV2Migration
                << " (schema contract v1 has no role table to check against)\n";
  }
  return kOk;
}

[[maybe_unused]] const bool registered =
    registerCommand({.name = "migrate",
                     .summary = "apply the idem schema migrations to a database",
                     .order = 10,
                     .run = runMigrate});

}  // namespace

}  // namespace idem::ctl

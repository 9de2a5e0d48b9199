#include <ostream>

#include "database_flags.hpp"
#include "idem/migrations.hpp"
#include "idemctl.hpp"

namespace idem::ctl {

int runMigrate(const std::vector<std::string>& args, Streams streams) {
  const std::vector<FlagSpec> specs{
      dsnFlag(),
      {"sql-dir", true, "DIR", "apply NNN_*.sql files from DIR instead of the bundled ones"},
      helpFlag()};
  const CommandLine cli(args, specs);
  if (cli.has("help")) {
    streams.out << "usage: idemctl migrate [flags]\n\n" << CommandLine::describe(specs);
    return kOk;
  }
  if (!cli.positionals().empty()) throw UsageError("unexpected argument '" + cli.positionals().front() + "'");

  const std::vector<Migration> migrations =
      cli.has("sql-dir") ? loadMigrations(*cli.value("sql-dir")) : bundledMigrations();
  auto connection = connect(connectionFrom(cli, "idemctl migrate"));
  const MigrationReport report = migrate(*connection, migrations);
  for (const std::string& name : report.applied) streams.out << "applied " << name << "\n";
  streams.out << (report.applied.empty() ? "schema up to date" : "schema migrated") << " ("
              << report.applied.size() << " applied, " << report.alreadyApplied
              << " already applied)\n";
  return kOk;
}

}  // namespace idem::ctl

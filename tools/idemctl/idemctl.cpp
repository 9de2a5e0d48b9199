#include "idemctl.hpp"

#include <ostream>

#include "idem/build_info.hpp"
#include "idem/command_line.hpp"
#include "idem/database_error.hpp"
#include "idem/migrations.hpp"

namespace idem::ctl {
namespace {

constexpr const char* kUsageText = R"(usage: idemctl COMMAND [flags]

commands:
  migrate        apply the idem schema migrations to a database
  simulate       run simulated agent traffic through the protocol
  settle KEY     settle a stuck record to SUCCESS or FAILED, or correct FAILED to SUCCESS
                 (operators)
  reconcile      resolve to SUCCESS the stuck records whose own key shows money moved, once or
                 every --every (reconcilers)
  expire-leases  turn PROCESSING records past their lease into UNKNOWN
  purge          delete settled records older than a given age, leaving tombstones of their keys
  help           this text; `idemctl COMMAND --help` describes a command's flags
  version        print the version

The database comes from --db.dsn, else IDEMWATCH_DSN, else libpq's environment (PGHOST, ...).
)";

}  // namespace

int run(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop) {
  if (args.empty()) {
    streams.err << kUsageText;
    return kUsage;
  }
  const std::string& command = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "migrate") return runMigrate(rest, streams);
    if (command == "simulate") return runSimulate(rest, streams, stop);
    if (command == "settle") return runSettle(rest, streams);
    if (command == "expire-leases") return runExpireLeases(rest, streams);
    if (command == "purge") return runPurge(rest, streams);
    if (command == "reconcile") return runReconcile(rest, streams, stop);
    if (command == "help" || command == "--help" || command == "-h") {
      streams.out << kUsageText;
      return kOk;
    }
    if (command == "version" || command == "--version") {
      streams.out << "idemctl " << IDEMWATCH_VERSION << " (revision " << buildRevision() << ")\n";
      return kOk;
    }
    streams.err << "idemctl: unknown command '" << command << "' (try: idemctl help)\n";
    return kUsage;
  } catch (const UsageError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kUsage;
  } catch (const DatabaseError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (const MigrationError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (const std::exception& e) {
    // Anything else still ends in one line and exit code 1, never in std::terminate.
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (...) {
    streams.err << "idemctl " << command << ": an unexpected error (not a std::exception)\n";
    return kFailed;
  }
}

}  // namespace idem::ctl

// idemctl: the operator's and the developer's command line for the idem schema. Each subcommand
// lives in its own file; main.cpp only wires signals and standard streams to run().
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

namespace idem::ctl {

// Exit codes: 0 done, 1 failed (database unreachable, a migration failed), 2 usage error; a settle
// the server refused (nothing was written) exits with one code per reason, so a runbook script can
// branch on it: 3 the record changed since the version given, 4 money moved (FAILED refused),
// 5 the lease is live, 6 invalid transition (SUCCESS is final, FAILED already), 7 no such key.
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,
  kUsage = 2,
  kConflict = 3,
  kMoneyMoved = 4,
  kLeaseActive = 5,
  kInvalidTransition = 6,
  kNotFound = 7,
};

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool interactive = false;  // stderr is a terminal: progress lines are welcome
};

// args excludes the program name. `stop` ends a running simulation or reconcile loop (SIGINT,
// SIGTERM).
int run(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop);

int runMigrate(const std::vector<std::string>& args, Streams streams);
int runSimulate(const std::vector<std::string>& args, Streams streams,
                const std::atomic<bool>& stop);
int runSettle(const std::vector<std::string>& args, Streams streams);
int runExpireLeases(const std::vector<std::string>& args, Streams streams);
int runPurge(const std::vector<std::string>& args, Streams streams);
// Runs idem.reconcile() once, or every --every until `stop`.
int runReconcile(const std::vector<std::string>& args, Streams streams,
                 const std::atomic<bool>& stop);

}  // namespace idem::ctl

// idemctl: the operator's and the developer's command line for the idem schema. Each subcommand
// lives in its own file; main.cpp only wires signals and standard streams to run().
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

namespace idem::ctl {

// Exit codes: 0 done, 1 failed (database unreachable, a migration failed), 2 usage error,
// 3 refused (a settle the database or the evidence turned down; nothing was written).
enum ExitCode : int { kOk = 0, kFailed = 1, kUsage = 2, kRefused = 3 };

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool interactive = false;  // stderr is a terminal: progress lines are welcome
};

// args excludes the program name. `stop` ends a running simulation early (SIGINT, SIGTERM).
int run(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop);

int runMigrate(const std::vector<std::string>& args, Streams streams);
int runSimulate(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop);
int runSettle(const std::vector<std::string>& args, Streams streams);
int runExpireLeases(const std::vector<std::string>& args, Streams streams);
int runPurge(const std::vector<std::string>& args, Streams streams);

}  // namespace idem::ctl

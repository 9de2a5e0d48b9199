// idemctl: the operator's and the developer's command line for the idem schema. Each subcommand
// lives in its own file and registers itself; main.cpp only wires signals and standard streams to
// run().
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

#include "idem/vocabulary.hpp"

namespace idem::ctl {

// Exit codes: 0 done, 1 failed (database unreachable, a migration failed), 2 usage error; a settle
// the server refused (nothing was written) exits with one code per result code, so a runbook script
// can branch on it: the codes are the vocabulary's (shared/vocabulary.toml, exitCodeOf).
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,
  kUsage = 2,
};
static_assert(exitCodeOf(ResultCode::Ok) == kOk);

struct Streams {
  std::ostream& out;
  std::ostream& err;
  bool interactive = false;  // stderr is a terminal: progress lines are welcome
};

// args excludes the program name. `stop` ends a running simulation or reconcile loop (SIGINT,
// SIGTERM).
int run(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop);

// A subcommand: args excludes the command's name; a command that runs once ignores `stop`.
using CommandRun = int (*)(const std::vector<std::string>& args, Streams streams,
                           const std::atomic<bool>& stop);

struct CommandRegistration {
  std::string name{};       // `idemctl NAME`
  std::string arguments{};  // what the command list shows after the name, e.g. "KEY" (may be empty)
  // The command list's description; a '\n' continues it on the next line, under the first.
  std::string summary{};
  int order = 100;  // position in the command list, lowest first
  CommandRun run = nullptr;
};

// Commands register themselves, as the exporter's collectors do: each command's .cpp ends with
// `[[maybe_unused]] const bool registered = registerCommand({...});` in its anonymous namespace.
// A new command is one new file (the CMake glob picks it up) plus its test.
bool registerCommand(CommandRegistration registration);

// Every registered command, in command-list order.
std::vector<const CommandRegistration*> registeredCommands();

}  // namespace idem::ctl

// idemwatch-exporter: see README.md beside this file. Parses the flags, runs until SIGINT/SIGTERM.
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "exporter.hpp"
#include "exporter_options.hpp"
#include "web_config.hpp"
#include "web_server.hpp"

int main(int argc, char** argv) {
  using namespace idem::exporter;
  // A handful of threads that allocate little: two malloc arenas instead of one per thread keep
  // the resident set small (an exporter should cost its host next to nothing).
  mallopt(M_ARENA_MAX, 2);
  // Block the stop signals before any thread starts, so that every thread inherits the mask and
  // only sigwait below receives them.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CommandLine commandLine;
  try {
    commandLine = parseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "idemwatch-exporter: %s\n", e.what());
    return 2;
  }
  if (commandLine.action == CommandLine::Action::PrintHelp) {
    std::cout << usageText();
    return 0;
  }
  if (commandLine.action == CommandLine::Action::PrintVersion) {
    std::cout << versionText() << '\n';
    return 0;
  }

  std::unique_ptr<Exporter> exporter;
  try {
    exporter = std::make_unique<Exporter>(commandLine.options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "idemwatch-exporter: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idemwatch-exporter: %s\n", e.what());
    return 1;
  }
  int signal = 0;
  sigwait(&stopSignals, &signal);
  logInfo(std::string("stopping on ") + (signal == SIGINT ? "SIGINT" : "SIGTERM"));
  exporter.reset();
  return 0;
}

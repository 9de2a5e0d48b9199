// idemwatch-exporter: see README.md beside this file. Parses the flags, runs until SIGINT/SIGTERM.
#include <malloc.h>

#include <csignal>
#include <iostream>

#include "exporter.hpp"
#include "exporter_options.hpp"
#include "idem/command_line.hpp"
#include "log.hpp"

namespace {

constexpr const char* kDescription =
    "Publishes the idem schema's figures (requests, fund flows, transitions, unsettled records,\n"
    "reconciliation) for Prometheus, reading new rows incrementally.";

}  // namespace

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

  return idem::guardedMain("idemwatch-exporter", [&] {
    ExporterOptions options;
    idem::CommandLine cli("idemwatch-exporter", "idemwatch-exporter [flags]", kDescription);
    declareFlags(cli, options);
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;
    auto exporter = std::make_unique<Exporter>(options);
    int signal = 0;
    sigwait(&stopSignals, &signal);
    logInfo(std::string("stopping on ") + (signal == SIGINT ? "SIGINT" : "SIGTERM"));
    exporter.reset();
    return 0;
  });
}

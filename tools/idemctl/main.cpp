#include <unistd.h>

#include <csignal>
#include <iostream>

#include "idem/command_line.hpp"
#include "idemctl.hpp"

namespace {
std::atomic<bool> stopRequested{false};
extern "C" void onSignal(int) {
  stopRequested.store(true);
}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  return idem::guardedMain("idemctl", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    return idem::ctl::run(args, {std::cout, std::cerr, isatty(STDERR_FILENO) == 1}, stopRequested);
  });
}

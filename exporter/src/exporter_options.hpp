// The exporter's command line, in the Prometheus exporters' conventions (--web.listen-address,
// --web.telemetry-path, --web.config.file, --log.level, --version), plus the database and the
// collection schedule. Parsing is separate from running so that tests pin every error message.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "log.hpp"

namespace idem::exporter {

using std::chrono::milliseconds;

struct ExporterOptions {
  std::string listenAddress = ":9477";
  std::string telemetryPath = "/metrics";
  std::optional<std::string> webConfigFile;
  LogLevel logLevel = LogLevel::Info;

  std::optional<std::string> dbDsn;  // else IDEMWATCH_DSN, else libpq's environment
  milliseconds statementTimeout{10'000};

  milliseconds collectInterval{5'000};
  milliseconds ratioWindow{5 * 60'000};
  milliseconds reconcileInterval{60'000};
  milliseconds reconcileWindow{24 * 3600'000};
  milliseconds reconcileGrace{5 * 60'000};
  std::vector<std::string> reconcileBizTypes{"payment"};
  // Distinct biz_type label values kept (first come first kept, reconcileBizTypes always);
  // further ones are counted under biz_type="other".
  std::size_t maxBizTypes = 100;

  // Ids below the high-water mark whose rows are not visible yet, per table (see
  // incremental_reader.hpp). Past this, the oldest are given up and counted as abandoned.
  std::size_t maxTrackedGaps = 100'000;
};

// A bad flag or value: the message is one line that names it; the process exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandLine {
  enum class Action { Run, PrintVersion, PrintHelp };
  Action action = Action::Run;
  ExporterOptions options;
};

// Accepts --flag=value and --flag value. Throws UsageError.
CommandLine parseCommandLine(const std::vector<std::string>& arguments);

std::string usageText();
std::string versionText();

// "host:port" as civetweb wants it in listening_ports: ":9477" -> "9477" (every IPv4 address),
// "127.0.0.1:9477", "[::1]:9477"; "localhost" becomes 127.0.0.1. Throws UsageError.
std::string civetwebListeningPort(const std::string& listenAddress);

}  // namespace idem::exporter

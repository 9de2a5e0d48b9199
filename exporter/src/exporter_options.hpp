// The exporter's command line, in the Prometheus exporters' conventions (--web.listen-address,
// --web.telemetry-path, --web.config.file, --log.level, --version), plus the database and the
// collection schedule; each collector declares its own flags beside its code (registry.hpp), and
// --collector.NAME / --no-collector.NAME choose which run. Parsing is separate from running so that
// tests pin every error message.
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "idem/command_line.hpp"
#include "log.hpp"

namespace idem::exporter {

using std::chrono::milliseconds;

struct ExporterOptions {
  std::string listenAddress = ":9477";
  std::string telemetryPath = "/metrics";
  std::optional<std::string> webConfigFile;
  // The web door's limits (web_server.hpp): connections open at once, in all and per client.
  int webMaxConnections = 1024;
  int webMaxConnectionsPerClient = 32;
  LogLevel logLevel = LogLevel::Info;

  std::optional<std::string> dbDsn;  // else IDEMWATCH_DSN, else libpq's environment
  milliseconds statementTimeout{10'000};

  milliseconds collectInterval{5'000};
  milliseconds ratioWindow{5 * 60'000};
  // Declared by the reconciliation collector; fields here because the overcharges collector and
  // the biz types' bound (reconcileBizTypes are always kept) share them.
  milliseconds reconcileInterval{60'000};
  milliseconds reconcileWindow{24 * 3600'000};
  milliseconds reconcileGrace{5 * 60'000};
  std::vector<std::string> reconcileBizTypes{"payment"};
  // Distinct biz_type label values kept (first come first kept, reconcileBizTypes always);
  // further ones are counted under biz_type="other".
  std::size_t maxBizTypes = 100;
  // Distinct currency label values kept (ISO 4217 codes, first come first kept); any other
  // currency is published as currency="other".
  std::size_t maxCurrencies = 20;
  // Distinct gateway label values kept (first come first kept); further gateways count as
  // gateway="other".
  std::size_t maxGateways = 20;

  // Ids below the high-water mark whose rows are not visible yet, per table (see
  // incremental_reader.hpp). At this many ranges of ids awaiting their rows, new rows wait.
  std::size_t maxTrackedGaps = 100'000;
  // On a hot standby, how long the primary's inserts into the counted tables may run at most: a gap
  // in the ids is proven permanent only once the standby replayed a commit this much later
  // (incremental_reader.hpp, "On a standby").
  std::chrono::milliseconds standbyStatementBound{60'000};

  // --collector.NAME (true) and --no-collector.NAME (false); a collector not named here runs if
  // it is on by default.
  std::map<std::string, bool> collectors;

  // The settings of a collector that declares its own flags, one object per type: a new collector
  // binds its flags to settings<ItsSettings>() and needs no field here.
  template <typename T>
  T& settings() {
    std::any& slot = collectorSettings_[typeid(T)];
    if (!slot.has_value()) slot = T{};
    return std::any_cast<T&>(slot);
  }
  template <typename T>
  T settings() const {
    const auto it = collectorSettings_.find(typeid(T));
    return it == collectorSettings_.end() ? T{} : std::any_cast<const T&>(it->second);
  }

 private:
  std::map<std::type_index, std::any> collectorSettings_;
};

// Declares every flag, the exporter's and each registered collector's, bound to `options`.
void declareFlags(CommandLine& cli, ExporterOptions& options);

// The options `arguments` give. Throws UsageError; help and version are main's (tests).
ExporterOptions parseOptions(const std::vector<std::string>& arguments);

std::string versionText();

// --web.listen-address read: ":9477" and "0.0.0.0:9477" (every IPv4 address: host empty),
// "127.0.0.1:9477", "[::1]:9477" (host ::1); "localhost" becomes 127.0.0.1. Throws UsageError.
struct ListenAddress {
  std::string host;  // an IP address; empty for every IPv4 address
  int port = 0;
};
ListenAddress parseListenAddress(const std::string& listenAddress);

}  // namespace idem::exporter

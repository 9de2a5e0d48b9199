#include "exporter_options.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <sstream>

#include "collectors/registry.hpp"

namespace idem::exporter {
namespace {

bool isPort(const std::string& s) {
  if (s.empty() || s.size() > 5) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return std::stoi(s) <= 65535;
}

}  // namespace

ListenAddress parseListenAddress(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    throw UsageError("--web.listen-address: \"" + address +
                     "\" needs a port, like :9477 or 127.0.0.1:9477");
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (!isPort(port)) {
    throw UsageError("--web.listen-address: \"" + port + "\" in \"" + address +
                     "\" is not a port number");
  }
  if (host.empty() || host == "0.0.0.0") return {"", std::stoi(port)};
  if (host == "localhost") host = "127.0.0.1";
  const bool ipv6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
  const bool ipv4 = std::all_of(host.begin(), host.end(),
                                [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) &&
                    std::count(host.begin(), host.end(), '.') == 3;
  if (!ipv4 && !ipv6) {
    throw UsageError("--web.listen-address: host \"" + host +
                     "\" must be an IP address ([::1] for IPv6) or localhost");
  }
  return {ipv6 ? host.substr(1, host.size() - 2) : host, std::stoi(port)};
}

std::string versionText() {
  return versionLine("idemwatch-exporter");
}

void declareFlags(CommandLine& cli, ExporterOptions& o) {
  cli.custom("web.listen-address", "ADDR", "where to serve", o.listenAddress,
             [&o](const std::string& v) {
               parseListenAddress(v);  // validates
               o.listenAddress = v;
             });
  cli.custom(
      "web.telemetry-path", "PATH", "path of the metrics", o.telemetryPath,
      [&o](const std::string& v) {
        if (v.size() < 2 || v.front() != '/' || v.find_first_of(" ?#") != std::string::npos) {
          throw badValue("web.telemetry-path", "a path like /metrics (not / itself)", v);
        }
        o.telemetryPath = v;
      });
  cli.custom("web.config.file", "FILE", "TLS and basic auth, exporter-toolkit format (see README)",
             "", [&o](const std::string& v) {
               if (v.empty()) throw badValue("web.config.file", "a file name", v);
               o.webConfigFile = v;
             });
  cli.integer("web.max-connections", "N",
              "connections open at once; one more is refused as it is accepted",
              o.webMaxConnections, 1, 100'000);
  cli.integer("web.max-connections-per-client", "N",
              "connections open at once from one client address; one more is refused as it is "
              "accepted",
              o.webMaxConnectionsPerClient, 1, 100'000);
  cli.custom("log.level", "LEVEL", "debug, info, warn or error", "info",
             [&o](const std::string& v) {
               const auto level = parseLogLevel(v);
               if (!level) throw badValue("log.level", "one of debug, info, warn, error", v);
               o.logLevel = *level;
             });
  cli.text("db.dsn", "DSN",
           "libpq connection string or URI (default: $IDEMWATCH_DSN, else PG* variables)", o.dbDsn);
  cli.duration("db.statement-timeout", "bound on every statement", o.statementTimeout,
               milliseconds(1));
  cli.duration("collect-interval", "how often to read new rows", o.collectInterval,
               milliseconds(100));
  cli.duration("ratio-window", "window of the three ratio gauges", o.ratioWindow,
               milliseconds(1000));
  cli.integer("max-tracked-gaps", "N",
              "per table, ranges of ids awaiting their rows; at the bound new rows wait (never "
              "dropped)",
              o.maxTrackedGaps, 1, 10'000'000);
  cli.duration("standby.statement-bound",
               "on a hot standby, the longest an insert on the primary may run; a gap in the ids "
               "is declared permanent only after it",
               o.standbyStatementBound, milliseconds(100));
  cli.integer("max-biz-types", "N",
              "biz_type label values kept; further ones count as \"other\" "
              "(--reconcile-biz-types are always kept)",
              o.maxBizTypes, 1, 100'000);
  cli.integer("max-currencies", "N",
              "currency label values kept (ISO 4217 codes only); further ones, and codes ISO 4217 "
              "does not list, count as \"other\"",
              o.maxCurrencies, 1, 1'000);

  // Each collector's own flags, then its switches; naming both switches is a contradiction.
  auto named = std::make_shared<std::set<std::string>>();
  for (const CollectorRegistration* r : registeredCollectors()) {
    if (r->declareFlags) r->declareFlags(cli, o);
    const std::string name = r->name;
    auto choose = [&o, named, name](bool on) {
      if (!named->insert(name).second) {
        throw UsageError("--collector." + name + " and --no-collector." + name +
                         " contradict each other");
      }
      o.collectors[name] = on;
    };
    cli.flag("collector." + name,
             "run the " + name + " collector" + (r->enabledByDefault ? " (default)" : ""),
             [choose] { choose(true); });
    cli.flag("no-collector." + name,
             "do not run the " + name + " collector" + (r->enabledByDefault ? "" : " (default)"),
             [choose] { choose(false); });
  }
}

ExporterOptions parseOptions(const std::vector<std::string>& arguments) {
  ExporterOptions options;
  CommandLine cli("idemwatch-exporter", "idemwatch-exporter [flags]");
  declareFlags(cli, options);
  std::ostringstream ignored;
  cli.parse(arguments, ignored);
  return options;
}

}  // namespace idem::exporter

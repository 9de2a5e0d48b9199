#include "exporter_options.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "idem/build_info.hpp"
#include "idem/duration.hpp"

namespace idem::exporter {
namespace {

milliseconds durationValue(const std::string& flag, const std::string& value, milliseconds min) {
  const auto d = parseDuration(value);
  if (!d) {
    throw UsageError(flag + ": \"" + value +
                     "\" is not a duration (write it like 500ms, 5s, 1m30s, 24h)");
  }
  if (*d < min) {
    throw UsageError(flag + ": " + value + " is too short (at least " + formatDuration(min) + ")");
  }
  return *d;
}

std::vector<std::string> listValue(const std::string& flag, const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    std::string item = value.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) throw UsageError(flag + ": \"" + value + "\" has an empty item");
    out.push_back(item);
    start = comma + 1;
  }
  return out;
}

bool isPort(const std::string& s) {
  if (s.empty() || s.size() > 5) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return std::stoi(s) <= 65535;
}

}  // namespace

std::string civetwebListeningPort(const std::string& address) {
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
  if (host.empty() || host == "0.0.0.0") return port;
  if (host == "localhost") host = "127.0.0.1";
  const bool ipv6 = host.front() == '[' && host.back() == ']';
  const bool ipv4 = std::all_of(host.begin(), host.end(),
                                [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) &&
                    std::count(host.begin(), host.end(), '.') == 3;
  if (!ipv4 && !ipv6) {
    throw UsageError("--web.listen-address: host \"" + host +
                     "\" must be an IP address ([::1] for IPv6) or localhost");
  }
  return host + ":" + port;
}

std::string versionText() {
  return std::string("idemwatch-exporter ") + IDEMWATCH_VERSION + " (revision " + buildRevision() +
         ")";
}

std::string usageText() {
  return R"(Usage: idemwatch-exporter [flags]

Publishes the idem schema's figures (requests, fund flows, transitions, unsettled records,
reconciliation) for Prometheus, reading new rows incrementally.

  --web.listen-address=ADDR     where to serve (default :9477)
  --web.telemetry-path=PATH     path of the metrics (default /metrics)
  --web.config.file=FILE        TLS and basic auth, exporter-toolkit format (see README)
  --log.level=LEVEL             debug, info, warn or error (default info)
  --db.dsn=DSN                  libpq connection string or URI (default: $IDEMWATCH_DSN, else PG* variables)
  --db.statement-timeout=DUR    bound on every statement (default 10s)
  --collect-interval=DUR        how often to read new rows (default 5s)
  --ratio-window=DUR            window of the three ratio gauges (default 5m)
  --reconcile-interval=DUR      how often to reconcile fund flows with records (default 1m)
  --reconcile-window=DUR        how far back reconciliation looks (default 24h)
  --reconcile-grace=DUR         ignore what is younger than this (default 5m)
  --reconcile-biz-types=LIST    comma-separated biz types that move money (default payment)
  --max-tracked-gaps=N          per table, ids awaiting their row (default 100000)
  --max-biz-types=N             biz_type label values kept; further ones count as "other"
                                (default 100; --reconcile-biz-types are always kept)
  --version                     print the version and exit
  -h, --help                    print this help and exit
)";
}

CommandLine parseCommandLine(const std::vector<std::string>& arguments) {
  CommandLine result;
  ExporterOptions& o = result.options;
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> setters{
      {"--web.listen-address",
       [&](const std::string&, const std::string& v) {
         civetwebListeningPort(v);  // validates
         o.listenAddress = v;
       }},
      {"--web.telemetry-path",
       [&](const std::string& f, const std::string& v) {
         if (v.size() < 2 || v.front() != '/' || v.find_first_of(" ?#") != std::string::npos) {
           throw UsageError(f + ": \"" + v + "\" must be a path like /metrics (not / itself)");
         }
         o.telemetryPath = v;
       }},
      {"--web.config.file",
       [&](const std::string& f, const std::string& v) {
         if (v.empty()) throw UsageError(f + ": empty file name");
         o.webConfigFile = v;
       }},
      {"--log.level",
       [&](const std::string& f, const std::string& v) {
         const auto level = parseLogLevel(v);
         if (!level) throw UsageError(f + ": \"" + v + "\" is not one of debug, info, warn, error");
         o.logLevel = *level;
       }},
      {"--db.dsn", [&](const std::string&, const std::string& v) { o.dbDsn = v; }},
      {"--db.statement-timeout",
       [&](const std::string& f, const std::string& v) {
         o.statementTimeout = durationValue(f, v, milliseconds(1));
       }},
      {"--collect-interval",
       [&](const std::string& f, const std::string& v) {
         o.collectInterval = durationValue(f, v, milliseconds(100));
       }},
      {"--ratio-window",
       [&](const std::string& f, const std::string& v) {
         o.ratioWindow = durationValue(f, v, milliseconds(1000));
       }},
      {"--reconcile-interval",
       [&](const std::string& f, const std::string& v) {
         o.reconcileInterval = durationValue(f, v, milliseconds(100));
       }},
      {"--reconcile-window",
       [&](const std::string& f, const std::string& v) {
         o.reconcileWindow = durationValue(f, v, milliseconds(1000));
       }},
      {"--reconcile-grace",
       [&](const std::string& f, const std::string& v) {
         o.reconcileGrace = durationValue(f, v, milliseconds(0));
       }},
      {"--reconcile-biz-types",
       [&](const std::string& f, const std::string& v) { o.reconcileBizTypes = listValue(f, v); }},
      {"--max-biz-types",
       [&](const std::string& f, const std::string& v) {
         std::size_t used = 0;
         unsigned long n = 0;
         try {
           n = std::stoul(v, &used);
         } catch (const std::exception&) {
           used = 0;
         }
         if (used != v.size() || v.empty() || n < 1 || n > 100'000) {
           throw UsageError(f + ": \"" + v + "\" is not a number between 1 and 100000");
         }
         o.maxBizTypes = n;
       }},
      {"--max-tracked-gaps",
       [&](const std::string& f, const std::string& v) {
         std::size_t used = 0;
         unsigned long n = 0;
         try {
           n = std::stoul(v, &used);
         } catch (const std::exception&) {
           used = 0;
         }
         if (used != v.size() || v.empty() || n < 1 || n > 10'000'000) {
           throw UsageError(f + ": \"" + v + "\" is not a number between 1 and 10000000");
         }
         o.maxTrackedGaps = n;
       }},
  };

  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& arg = arguments[i];
    if (arg == "--version") {
      result.action = CommandLine::Action::PrintVersion;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      result.action = CommandLine::Action::PrintHelp;
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const auto setter = setters.find(flag);
    if (!arg.starts_with("--") || setter == setters.end()) {
      throw UsageError("unknown flag " + flag + " (see --help)");
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < arguments.size()) {
      value = arguments[++i];
    } else {
      throw UsageError(flag + " needs a value");
    }
    setter->second(flag, value);
  }
  if (o.reconcileGrace >= o.reconcileWindow) {
    throw UsageError("--reconcile-grace (" + formatDuration(o.reconcileGrace) +
                     ") must be shorter than --reconcile-window (" +
                     formatDuration(o.reconcileWindow) + ")");
  }
  return result;
}

}  // namespace idem::exporter

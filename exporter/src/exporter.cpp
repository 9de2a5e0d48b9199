#include "exporter.hpp"

#include <libpq-fe.h>

#include "collection_loop.hpp"
#include "collectors/collector_list.hpp"
#include "idem/duration.hpp"
#include "log.hpp"
#include "web_server.hpp"

namespace idem::exporter {
namespace {

// A DSN libpq cannot even parse is a configuration error, reported at start; an unreachable
// server is not (it may come up later).
void checkDsnSyntax(const ConnectionSettings& settings) {
  if (settings.dsn.empty()) return;
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(settings.dsn.c_str(), &error);
  if (parsed == nullptr) {
    std::string reason = error != nullptr ? error : "out of memory";
    if (error != nullptr) PQfreemem(error);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    throw UsageError(settings.source + ": the connection string " + settings.redacted() +
                     " is not valid: " + reason);
  }
  PQconninfoFree(parsed);
}

}  // namespace

Exporter::Exporter(const ExporterOptions& options) {
  setLogLevel(options.logLevel);
  WebServerSettings web;
  web.listenAddress = options.listenAddress;
  web.telemetryPath = options.telemetryPath;
  web.limits.maxConnections = options.webMaxConnections;
  web.limits.maxPerClient = options.webMaxConnectionsPerClient;
  if (options.webConfigFile) web.webConfig = loadWebConfig(*options.webConfigFile);
  for (const auto& warning : web.webConfig.warnings) logWarn(warning);

  ConnectionSettings connection = ConnectionSettings::resolve(options.dbDsn);
  connection.statementTimeout = options.statementTimeout;
  connection.applicationName = "idemwatch-exporter";
  checkDsnSyntax(connection);

  collectors_ = std::make_shared<CollectorSet>(options);
  // The web server stops before the collectors go (see the destructor).
  web.landingStatus = [set = collectors_.get()] {
    return "Database: " + set->health().databaseRole() + ".";
  };

  web_ = std::make_unique<WebServer>(web, collectors_);
  logInfo(versionText() + " serving " + (web_->tls() ? "https" : "http") + " on " +
          options.listenAddress + options.telemetryPath +
          (web.webConfig.basicAuthUsers.empty() ? "" : " with basic auth") + "; database " +
          connection.redacted() + " (from " + connection.source + "), collecting every " +
          formatDuration(options.collectInterval) + ", ratio window " +
          formatDuration(options.ratioWindow));
  loop_ = std::make_unique<CollectionLoop>(connection, *collectors_, options.collectInterval);
  loop_->start();
}

Exporter::~Exporter() {
  if (loop_) loop_->stop();
  web_.reset();
}

std::vector<int> Exporter::ports() const {
  return web_->ports();
}

std::vector<prometheus::MetricFamily> Exporter::collect() const {
  return collectors_->Collect();
}

std::uint64_t Exporter::collections() const {
  return loop_->collections();
}

}  // namespace idem::exporter

// The HTTP side: prometheus-cpp's Exposer (civetweb) serves the telemetry path from the collectors'
// in-memory state; a civetweb begin_request hook in front of it serves the landing page at /,
// answers 404 elsewhere and enforces the rate limit and basic auth on every path. TLS is
// civetweb's, with the SSL_CTX configured by tls_context.cpp from --web.config.file. Nothing here
// touches the database.
//
// Slow clients cannot starve a scrape: a request's headers (and its TLS handshake) must arrive
// within kHeaderTimeout, or civetweb drops the connection, and there are threads enough for a
// few dozen such clients at once; authentication starts only once the headers are in, and a
// remembered login needs no bcrypt run (basic_auth.hpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "web_config.hpp"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace idem::exporter {

struct WebServerSettings {
  std::string listenAddress = ":9477";
  std::string telemetryPath = "/metrics";
  WebConfig webConfig;
  // A line for the landing page, asked at each visit (what the database is); may be empty.
  std::function<std::string()> landingStatus;
  // civetweb's worker threads: each holds one connection, however slow its client.
  int threads = 48;
};

// civetweb's request_timeout_ms: the whole request head, and the TLS handshake, must arrive
// within this time from the connection's start.
inline constexpr int kHeaderTimeoutMs = 2500;

class WebServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WebServer {
 public:
  // Starts listening; throws WebServerError when the address cannot be bound or TLS cannot be
  // set up (with civetweb's reason).
  WebServer(const WebServerSettings& settings, std::shared_ptr<prometheus::Collectable> metrics);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  std::vector<int> ports() const;
  bool tls() const { return tls_; }

  struct Gate;  // the begin_request hook's per-server state

 private:
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<TlsServerConfig> tlsConfig_;  // read by the TLS verify callback while serving
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> metrics_;
  std::vector<int> ports_;
  bool tls_ = false;
};

}  // namespace idem::exporter

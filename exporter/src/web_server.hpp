// The HTTP side, on Boost.Beast and Asio, asynchronous end to end: a few I/O threads serve every
// connection, so a client that is slow to finish its TLS handshake or its request head costs a
// socket and a timer, never a thread, and cannot hold up anyone else's scrape. The telemetry path
// is serialised from the collectors' in-memory state; the landing page is served at /, 404
// elsewhere; basic auth and the rate limit apply on every path. TLS is OpenSSL's, with the SSL_CTX
// configured by tls_context.cpp from --web.config.file. Nothing here touches the database.
//
// The door's limits (DoorLimits): at most so many connections open at once, and so many from one
// client address; one beyond either is refused as it is accepted (closed at once). A connection
// has handshakeTimeout for its TLS handshake, then headTimeout for its request head (at most
// maxHeadBytes), then writeTimeout to take the answer; one connection, one request. Authentication
// starts once the head is in, off the I/O threads (bcrypt is slow on purpose; a remembered login
// needs no run: basic_auth.hpp), and the rate limit is spent only by requests that passed it, in
// a bucket per client (the user, or the address without basic auth), so strangers never spend the
// scraper's allowance.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>  // std::exchange, which Boost 1.74's asio/awaitable.hpp uses without it
#include <vector>

#include "idem/web/web_config.hpp"

namespace prometheus {
class Collectable;
}  // namespace prometheus

namespace idem::exporter {

struct DoorLimits {
  int maxConnections = 1024;  // open at once, from anyone
  int maxPerClient = 32;      // open at once from one client address
  std::chrono::milliseconds handshakeTimeout{2500};
  std::chrono::milliseconds headTimeout{2500};
  std::chrono::milliseconds writeTimeout{10000};
  std::size_t maxHeadBytes = 16384;  // request line and headers; beyond: 431
  int ioThreads = 2;
};

struct WebServerSettings {
  std::string listenAddress = ":9477";
  std::string telemetryPath = "/metrics";
  WebConfig webConfig;
  // A line for the landing page, asked at each visit (what the database is); may be empty.
  std::function<std::string()> landingStatus;
  DoorLimits limits;
};

// The door's own figures, published with the collectors' on the telemetry path.
struct DoorCounts {
  std::uint64_t refusedTotalLimit = 0;   // beyond maxConnections
  std::uint64_t refusedClientLimit = 0;  // beyond maxPerClient
  std::uint64_t handshakeTimeouts = 0;   // TLS handshake not done in time
  std::uint64_t handshakeFailures = 0;   // TLS refused (no or a bad client certificate...)
  std::uint64_t headTimeouts = 0;        // request head not in within headTimeout
  std::uint64_t rateLimited = 0;         // answered 429
  std::uint64_t unauthorized = 0;        // answered 401
  std::int64_t open = 0;                 // connections open now
};

class WebServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WebServer {
 public:
  // Starts listening; throws WebServerError when the address cannot be bound or TLS cannot be
  // set up, with the reason.
  WebServer(const WebServerSettings& settings, std::shared_ptr<prometheus::Collectable> metrics);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  std::vector<int> ports() const;
  bool tls() const;
  DoorCounts counts() const;

  class Door;

 private:
  std::unique_ptr<Door> door_;
};

}  // namespace idem::exporter

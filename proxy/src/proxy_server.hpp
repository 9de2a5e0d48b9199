// idemwatch-proxy's HTTP door: every request of a configured route is claimed through the protocol
// (idem.begin) before it goes upstream, and its outcome reported (complete, fail, mark_unknown)
// before the answer goes back. A repeat of a key is answered from the record, never sent again:
// the stored response replayed, 409 while the claim is live or its outcome unknown, 422 for the
// key with another request. Requests of no route are refused (404).
#pragma once

#include <memory>
#include <string>
#include <utility>  // std::exchange, which Boost 1.74's asio/awaitable.hpp uses without it

#include "proxy_config.hpp"

namespace idem::proxy {

class ProxyServer {
 public:
  // `configPath`: the file SIGHUP reads again for new routes ("" : no reload).
  ProxyServer(ProxyConfig config, std::string configPath = {});
  ~ProxyServer();
  ProxyServer(const ProxyServer&) = delete;
  ProxyServer& operator=(const ProxyServer&) = delete;

  // Serves until SIGINT or SIGTERM: then accepts nothing more and finishes what is in flight.
  // SIGHUP reloads the routes.
  // Returns the process's exit code.
  int run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace idem::proxy

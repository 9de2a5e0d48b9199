// idemwatch-proxy: the Idempotency-Key layer in front of any HTTP tool (proxy/README.md). Reads its
// routes, then serves until SIGINT or SIGTERM.
#include <csignal>
#include <iostream>
#include <optional>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "proxy_config.hpp"
#include "proxy_server.hpp"

namespace {

constexpr const char* kDescription =
    "Claims every request of a configured route through the idem schema before it goes upstream,\n"
    "replays a completed key's answer, and never sends a request whose outcome is unknown again.";

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  return idem::guardedMain("idemwatch-proxy", [&] {
    std::string configPath = "/etc/idemwatch/proxy.yml";
    std::optional<std::string> dsn;
    std::optional<std::string> listen;
    std::optional<std::string> webConfig;
    bool check = false;
    idem::CommandLine cli("idemwatch-proxy", "idemwatch-proxy [flags]", kDescription);
    cli.text("config.file", "FILE", "the routes (YAML)", configPath);
    cli.text("db.dsn", "DSN",
             "the database (else the file's database.dsn, IDEMWATCH_DSN, libpq's environment)",
             dsn);
    cli.text("web.listen-address", "HOST:PORT", "where to listen (else the file's listen)", listen);
    cli.text("web.config.file", "FILE",
             "TLS and basic auth, as idemwatch-exporter's (else the file's web_config_file)",
             webConfig);
    cli.flag("check",
             "read the routes and the web config, say what is wrong, and exit without serving "
             "(as before a reload)",
             check);
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;
    auto config = idem::proxy::loadProxyConfig(configPath);
    if (dsn || config.dsn.empty()) config.dsn = idem::ConnectionSettings::resolve(dsn).dsn;
    if (listen) {
      const auto colon = listen->rfind(':');
      if (colon == std::string::npos) {
        throw idem::badValue("web.listen-address", "HOST:PORT", *listen);
      }
      config.listenAddress = colon == 0 ? "0.0.0.0" : listen->substr(0, colon);
      config.listenPort = listen->substr(colon + 1);
    }
    if (webConfig) config.webConfigFile = *webConfig;
    const std::size_t routes = config.routes.size();
    idem::proxy::ProxyServer server(std::move(config), configPath);
    if (check) {
      std::cout << configPath << ": " << routes << " route(s), ready to serve\n";
      return 0;
    }
    return server.run();
  });
}

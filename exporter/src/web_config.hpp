// --web.config.file: the part of the Prometheus exporter toolkit's web configuration that Debian's
// civetweb 1.15 (under prometheus-cpp 1.0) can honour: TLS with a certificate and key, optional
// client certificates, a minimum TLS version, and basic auth with bcrypt hashes. Anything else in
// the file is refused by name rather than silently ignored, because a security setting the server
// does not apply is worse than an error at start.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace idem::exporter {

struct TlsServerConfig {
  std::filesystem::path certFile;
  std::filesystem::path keyFile;
  std::optional<std::filesystem::path> clientCaFile;
  // civetweb's ssl_verify_peer: "no", "optional" (verify if given) or "yes" (required).
  std::string verifyPeer = "no";
  // civetweb's ssl_protocol_version: 2 = TLS 1.0+, 3 = TLS 1.1+, 4 = TLS 1.2+, 5 = TLS 1.3.
  int protocolVersion = 4;
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;
  std::map<std::string, std::string> basicAuthUsers;  // user -> bcrypt hash
};

class WebConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and checks the file; relative paths inside it are relative to its folder, as in the
// toolkit. Throws WebConfigError naming the file and the problem (with a line number for syntax).
WebConfig loadWebConfig(const std::filesystem::path& file);

// The same for text already read (tests).
WebConfig parseWebConfig(std::string_view text, const std::filesystem::path& baseDir);

}  // namespace idem::exporter

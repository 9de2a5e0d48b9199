// --web.config.file: the Prometheus exporter toolkit's web configuration, read with yaml-cpp, as
// far as idemwatch's HTTP/1.1 servers (the exporter's, the proxy's) can honour it: TLS from files
// or inline PEM with all five client_auth_type policies, client_allowed_sans, cipher suites, curves
// and TLS versions by the toolkit's (Go's) names; the toolkit's response headers; its rate limit;
// basic auth with bcrypt hashes. What the toolkit refuses at load time is refused here at start,
// and what the server cannot honour (http2: true) is refused by key name and why, because a
// security setting the server does not apply is worse than an error at start.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace idem {

// Go's tls.ClientAuthType, by the toolkit's names.
enum class ClientAuth {
  NoClientCert,                // no certificate asked for
  RequestClientCert,           // asked for, not required, not verified
  RequireAnyClientCert,        // required, not verified
  VerifyClientCertIfGiven,     // verified against the client CAs when given
  RequireAndVerifyClientCert,  // required and verified against the client CAs
};

// OpenSSL's protocol version numbers (TLS1_2_VERSION = 0x0303, …).
enum class TlsVersion { Tls10 = 0x0301, Tls11 = 0x0302, Tls12 = 0x0303, Tls13 = 0x0304 };

struct TlsServerConfig {
  // Where the PEM texts came from: a file (resolved against the config's folder) or empty when
  // given inline (cert, key, client_ca).
  std::filesystem::path certFile;
  std::filesystem::path keyFile;
  std::optional<std::filesystem::path> clientCaFile;
  std::string certPem;
  std::string keyPem;
  std::string clientCaPem;  // empty: no client CAs
  ClientAuth clientAuth = ClientAuth::NoClientCert;
  TlsVersion minVersion = TlsVersion::Tls12;
  TlsVersion maxVersion = TlsVersion::Tls13;
  // OpenSSL's names for the TLS 1.0-1.2 suites; empty: OpenSSL's defaults. As in Go, TLS 1.3
  // suites are not configurable and the TLS 1.3 names are accepted and ignored.
  std::vector<std::string> cipherSuites;
  std::vector<std::string> curves;  // OpenSSL's group names, in preference order
  bool preferServerCipherSuites = true;
  // When set, a client certificate must carry one of these DNS, e-mail, IP or URI SANs.
  std::optional<std::vector<std::string>> clientAllowedSans;
};

struct RateLimit {
  std::chrono::milliseconds interval{0};  // between two requests; 0: no limit
  int burst = 0;
};

// bcrypt costs above this are refused at start: one failed check at cost 15 takes over a second
// of CPU here, and the toolkit's users run 10-12 (htpasswd -B defaults to 5, the toolkit's
// example to 10).
inline constexpr int kMaxBcryptCost = 14;

struct WebConfig {
  std::optional<TlsServerConfig> tls;
  std::map<std::string, std::string> basicAuthUsers;  // user -> bcrypt hash
  std::map<std::string, std::string> headers;         // http_server_config.headers
  RateLimit rateLimit;
  // What loads but should not stay as it is (a TLS key others may read), for the start-up log.
  std::vector<std::string> warnings;
};

class WebConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and checks the file; relative paths inside it are relative to its folder, as in the
// toolkit. Throws WebConfigError naming the file and the problem, with the line of the key.
WebConfig loadWebConfig(const std::filesystem::path& file);

// The same for text already read (tests).
WebConfig parseWebConfig(std::string_view text, const std::filesystem::path& baseDir);

}  // namespace idem

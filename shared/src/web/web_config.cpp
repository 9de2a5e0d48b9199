#include "idem/web/web_config.hpp"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>

#include "idem/duration.hpp"

namespace idem {
namespace {

using YAML::Node;

// Every message names the line of the node it is about (yaml-cpp counts from 0).
[[noreturn]] void fail(const Node& at, const std::string& what) {
  const YAML::Mark mark = at.Mark();
  if (mark.is_null()) throw WebConfigError(what);
  throw WebConfigError("line " + std::to_string(mark.line + 1) + ": " + what);
}

const char* kindName(const Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "a single value";
}

std::string text(const Node& node, const std::string& key) {
  if (node.IsNull()) return {};
  if (!node.IsScalar()) fail(node, key + " must be a single value, not " + kindName(node));
  return node.Scalar();
}

std::vector<std::string> texts(const Node& node, const std::string& key) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) fail(node, key + " must be a list, not " + kindName(node));
  std::vector<std::string> out;
  for (const Node& item : node) out.push_back(text(item, key + " entry"));
  return out;
}

bool boolean(const Node& node, const std::string& key) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
    fail(node, key + " must be true or false");
  return value;
}

// The entries of a mapping, in file order; duplicate keys are refused (yaml-cpp keeps both), and
// so is any key outside `known` unless `known` is empty (user names, header names).
std::vector<std::pair<std::string, Node>> entries(const Node& node, const std::string& where,
                                                  const std::vector<std::string_view>& known,
                                                  const std::string& expected) {
  std::vector<std::pair<std::string, Node>> out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) fail(node, where + " must be a mapping, not " + kindName(node));
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const std::string key = text(entry.first, "a key of " + where);
    const std::string name = where.empty() ? key : where + "." + key;
    if (!known.empty() && std::find(known.begin(), known.end(), key) == known.end())
      fail(entry.first, "unknown key \"" + name + "\" (expected " + expected + ")");
    if (!seen.insert(key).second) fail(entry.first, "duplicate key \"" + name + "\"");
    out.emplace_back(key, entry.second);
  }
  return out;
}

std::filesystem::path resolvePath(const std::string& value, const std::filesystem::path& baseDir) {
  std::filesystem::path p(value);
  return p.is_absolute() ? p : baseDir / p;
}

std::string readFile(const std::filesystem::path& p, const std::string& key) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  if (!f) throw WebConfigError(key + " " + p.string() + " cannot be read");
  return text.str();
}

// --- TLS ---------------------------------------------------------------------------------------

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

Bio memoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

int countCertificates(const std::string& pem) {
  Bio bio = memoryBio(pem);
  int n = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_free(cert);
    ++n;
  }
  return n;
}

// As the toolkit's tls.X509KeyPair: a certificate, a private key, and the two belong together.
void checkKeyPair(const TlsServerConfig& tls, const std::string& certKey,
                  const std::string& keyKey) {
  Bio certBio = memoryBio(tls.certPem);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(certBio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) throw WebConfigError("tls_server_config." + certKey + " holds no PEM certificate");
  Bio keyBio = memoryBio(tls.keyPem);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) throw WebConfigError("tls_server_config." + keyKey + " holds no PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    throw WebConfigError("tls_server_config." + keyKey + " is not the key of the certificate in " +
                         certKey);
  }
}

// Go's names (tls.CipherSuites(), the ones the toolkit accepts) to OpenSSL's. The TLS 1.3 suites
// map to nothing: Go does not let them be configured, and neither does the toolkit.
const std::map<std::string, std::string, std::less<>>& cipherNames() {
  static const std::map<std::string, std::string, std::less<>> names{
      {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
      {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
      {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
      {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
      {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
      {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
      {"TLS_AES_128_GCM_SHA256", ""},
      {"TLS_AES_256_GCM_SHA384", ""},
      {"TLS_CHACHA20_POLY1305_SHA256", ""},
  };
  return names;
}

const std::map<std::string, std::string, std::less<>> kCurves{
    {"CurveP256", "P-256"}, {"CurveP384", "P-384"}, {"CurveP521", "P-521"}, {"X25519", "X25519"}};

const std::map<std::string, TlsVersion, std::less<>> kVersions{{"TLS10", TlsVersion::Tls10},
                                                               {"TLS11", TlsVersion::Tls11},
                                                               {"TLS12", TlsVersion::Tls12},
                                                               {"TLS13", TlsVersion::Tls13}};

const std::map<std::string, ClientAuth, std::less<>> kClientAuth{
    {"", ClientAuth::NoClientCert},
    {"NoClientCert", ClientAuth::NoClientCert},
    {"RequestClientCert", ClientAuth::RequestClientCert},
    {"RequireAnyClientCert", ClientAuth::RequireAnyClientCert},
    {"RequireClientCert", ClientAuth::RequireAnyClientCert},  // the toolkit's old name
    {"VerifyClientCertIfGiven", ClientAuth::VerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuth::RequireAndVerifyClientCert},
};

template <class Value>
Value lookup(const std::map<std::string, Value, std::less<>>& table, const Node& node,
             const std::string& key, const std::string& what) {
  const std::string value = text(node, key);
  const auto found = table.find(value);
  if (found == table.end()) fail(node, key + ": unknown " + what + " \"" + value + "\"");
  return found->second;
}

// Where each PEM text comes from: a file key or an inline key, never both.
struct PemSource {
  const char* fileKey;
  const char* inlineKey;
  const Node* file = nullptr;
  const Node* inlineText = nullptr;
};

std::string pemText(const PemSource& source, const std::filesystem::path& baseDir,
                    std::filesystem::path& fileOut) {
  const std::string fileKey = std::string("tls_server_config.") + source.fileKey;
  if (source.file != nullptr && source.inlineText != nullptr) {
    fail(*source.inlineText, std::string("tls_server_config: give ") + source.fileKey + " or " +
                                 source.inlineKey + ", not both");
  }
  if (source.file != nullptr) {
    const std::string value = text(*source.file, fileKey);
    if (value.empty()) return {};
    fileOut = resolvePath(value, baseDir);
    return readFile(fileOut, source.fileKey);
  }
  if (source.inlineText != nullptr)
    return text(*source.inlineText, std::string("tls_server_config.") + source.inlineKey);
  return {};
}

std::optional<TlsServerConfig> tlsConfig(const Node& node, const std::filesystem::path& baseDir) {
  static const std::vector<std::string_view> known{"cert_file",
                                                   "key_file",
                                                   "client_ca_file",
                                                   "cert",
                                                   "key",
                                                   "client_ca",
                                                   "client_auth_type",
                                                   "min_version",
                                                   "max_version",
                                                   "cipher_suites",
                                                   "curve_preferences",
                                                   "prefer_server_cipher_suites",
                                                   "client_allowed_sans"};
  const auto all = entries(node, "tls_server_config", known,
                           "a key of the exporter toolkit's tls_server_config");
  if (all.empty()) return std::nullopt;
  std::map<std::string, Node> keys(all.begin(), all.end());
  const auto at = [&](const char* key) -> const Node* {
    const auto found = keys.find(key);
    return found == keys.end() ? nullptr : &found->second;
  };
  const auto name = [](const char* key) { return std::string("tls_server_config.") + key; };

  TlsServerConfig tls;
  std::filesystem::path clientCaFile;
  if ((!at("cert_file") && !at("cert")) || (!at("key_file") && !at("key"))) {
    throw WebConfigError(
        "tls_server_config needs both cert_file and key_file (or cert and key inline)");
  }
  tls.certPem = pemText({"cert_file", "cert", at("cert_file"), at("cert")}, baseDir, tls.certFile);
  tls.keyPem = pemText({"key_file", "key", at("key_file"), at("key")}, baseDir, tls.keyFile);
  if (tls.certPem.empty() || tls.keyPem.empty()) {
    throw WebConfigError(
        "tls_server_config needs both cert_file and key_file (or cert and key inline)");
  }
  checkKeyPair(tls, at("cert_file") ? "cert_file" : "cert", at("key_file") ? "key_file" : "key");
  tls.clientCaPem = pemText({"client_ca_file", "client_ca", at("client_ca_file"), at("client_ca")},
                            baseDir, clientCaFile);
  if (!clientCaFile.empty()) tls.clientCaFile = clientCaFile;
  if (!tls.clientCaPem.empty() && countCertificates(tls.clientCaPem) == 0) {
    throw WebConfigError(name(at("client_ca_file") ? "client_ca_file" : "client_ca") +
                         " holds no PEM certificate");
  }

  if (const Node* n = at("client_auth_type"))
    tls.clientAuth = lookup(kClientAuth, *n, name("client_auth_type"), "client auth policy");
  if (const Node* n = at("min_version"))
    tls.minVersion = lookup(kVersions, *n, name("min_version"), "TLS version");
  if (const Node* n = at("max_version"))
    tls.maxVersion = lookup(kVersions, *n, name("max_version"), "TLS version");
  if (tls.minVersion > tls.maxVersion)
    throw WebConfigError("tls_server_config.min_version is above max_version");
  if (const Node* n = at("cipher_suites")) {
    texts(*n, name("cipher_suites"));  // a single value is refused: not a list
    for (const Node& item : *n) {
      const std::string openssl = lookup(cipherNames(), item, name("cipher_suites"), "cipher");
      if (!openssl.empty()) tls.cipherSuites.push_back(openssl);
    }
  }
  if (const Node* n = at("curve_preferences")) {
    texts(*n, name("curve_preferences"));
    for (const Node& item : *n)
      tls.curves.push_back(lookup(kCurves, item, name("curve_preferences"), "curve"));
  }
  if (const Node* n = at("prefer_server_cipher_suites"))
    tls.preferServerCipherSuites = boolean(*n, name("prefer_server_cipher_suites"));
  if (const Node* n = at("client_allowed_sans"))
    tls.clientAllowedSans = texts(*n, name("client_allowed_sans"));

  // The toolkit's rule, and idemwatch's: client certificates are verified against the
  // configured client CAs only, never against the system's trust store.
  const bool verifies = tls.clientAuth == ClientAuth::VerifyClientCertIfGiven ||
                        tls.clientAuth == ClientAuth::RequireAndVerifyClientCert;
  if (!tls.clientCaPem.empty() && tls.clientAuth == ClientAuth::NoClientCert) {
    throw WebConfigError(
        "tls_server_config: client CAs have been configured without a client auth policy "
        "(client_auth_type)");
  }
  if (verifies && tls.clientCaPem.empty()) {
    throw WebConfigError(
        "tls_server_config.client_auth_type needs client_ca_file (or client_ca): client "
        "certificates are verified against those CAs only");
  }
  if (tls.clientAllowedSans && tls.clientAuth == ClientAuth::NoClientCert) {
    throw WebConfigError(
        "tls_server_config.client_allowed_sans needs a client_auth_type that asks for a client "
        "certificate");
  }
  return tls;
}

// --- HTTP, rate limit, users -------------------------------------------------------------------

// The toolkit's rule: only these headers may be set, some only to these values.
const std::map<std::string, std::vector<std::string>, std::less<>> kHeaders{
    {"Strict-Transport-Security", {}},
    {"X-Content-Type-Options", {"nosniff"}},
    {"X-Frame-Options", {"deny", "sameorigin"}},
    {"X-XSS-Protection", {}},
    {"Content-Security-Policy", {}},
};

void httpConfig(const Node& node, WebConfig& config) {
  for (const auto& [key, value] :
       entries(node, "http_server_config", {"http2", "headers"}, "http2 or headers")) {
    if (key == "http2") {
      if (boolean(value, "http_server_config.http2")) {
        fail(value,
             "http_server_config.http2: true cannot be honoured: this web server "
             "serves HTTP/1.1 only; set it to false");
      }
      continue;
    }
    for (const auto& [header, valueNode] : entries(value, "http_server_config.headers", {}, "")) {
      const std::string where = "http_server_config.headers." + header;
      const std::string v = text(valueNode, where);
      const auto allowed = kHeaders.find(header);
      if (allowed == kHeaders.end())
        fail(valueNode, "HTTP header \"" + header + "\" can not be configured");
      if (std::any_of(v.begin(), v.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
        fail(valueNode, where + ": control characters are not allowed in a header value");
      }
      if (v.empty()) continue;  // unset if blank, as in the toolkit
      const auto& values = allowed->second;
      if (!values.empty() && std::find(values.begin(), values.end(), v) == values.end()) {
        std::string expected;
        for (const auto& a : values) expected += (expected.empty() ? "\"" : ", \"") + a + "\"";
        fail(valueNode, where + ": \"" + v + "\" is not one of " + expected);
      }
      config.headers[header] = v;
    }
  }
}

void rateLimit(const Node& node, WebConfig& config) {
  for (const auto& [key, value] :
       entries(node, "rate_limit", {"interval", "burst"}, "interval or burst")) {
    const std::string v = text(value, "rate_limit." + key);
    if (key == "interval") {
      const auto d = v == "0" ? std::optional(std::chrono::milliseconds(0)) : parseDuration(v);
      if (!d) fail(value, "rate_limit.interval: \"" + v + "\" is not a duration such as 1s");
      config.rateLimit.interval = *d;
    } else {
      int burst = 0;
      if (!YAML::convert<int>::decode(value, burst) || burst < 0)
        fail(value, "rate_limit.burst: \"" + v + "\" is not a whole number");
      config.rateLimit.burst = burst;
    }
  }
  if (config.rateLimit.interval.count() > 0 && config.rateLimit.burst < 1)
    fail(node, "rate_limit.burst must be at least 1 when rate_limit.interval is set");
}

void basicAuthUsers(const Node& node, WebConfig& config) {
  static const std::regex bcrypt(R"(^\$2[aby]\$([0-9]{2})\$[./A-Za-z0-9]{53}$)");
  if (node.IsSequence())
    fail(node, "basic_auth_users must map each user name to a bcrypt hash, not be a list");
  for (const auto& [user, value] : entries(node, "basic_auth_users", {}, "")) {
    const std::string hash = text(value, "basic_auth_users." + user);
    if (user.find(':') != std::string::npos)
      fail(value, "basic_auth_users: user \"" + user + "\" must not contain ':'");
    std::smatch m;
    if (!std::regex_match(hash, m, bcrypt) || std::stoi(m[1]) < 4 || std::stoi(m[1]) > 31) {
      fail(value, "basic_auth_users: the password of \"" + user +
                      "\" is not a bcrypt hash ($2a$, $2b$ or $2y$, as htpasswd -B makes)");
    }
    if (const int cost = std::stoi(m[1]); cost > kMaxBcryptCost) {
      fail(value, "basic_auth_users: the bcrypt cost " + std::to_string(cost) + " of \"" + user +
                      "\" is above " + std::to_string(kMaxBcryptCost) +
                      ", the most idemwatch accepts (a wrong password would cost seconds of "
                      "CPU); hash it again with htpasswd -B -C 12");
    }
    config.basicAuthUsers[user] = hash;
  }
}

}  // namespace

WebConfig parseWebConfig(std::string_view text, const std::filesystem::path& baseDir) {
  Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw WebConfigError("line " + std::to_string(e.mark.line + 1) + ", column " +
                         std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  WebConfig config;
  if (!root.IsNull() && !root.IsMap())
    fail(root, "the file must be a mapping (tls_server_config, basic_auth_users, ...), not " +
                   std::string(kindName(root)));
  try {
    for (const auto& [key, value] :
         entries(root, "",
                 {"tls_server_config", "http_server_config", "rate_limit", "basic_auth_users"},
                 "tls_server_config, http_server_config, rate_limit or basic_auth_users")) {
      if (key == "tls_server_config") {
        config.tls = tlsConfig(value, baseDir);
      } else if (key == "http_server_config") {
        httpConfig(value, config);
      } else if (key == "rate_limit") {
        rateLimit(value, config);
      } else {
        basicAuthUsers(value, config);
      }
    }
  } catch (const YAML::Exception& e) {  // an alias to nothing, a bad conversion
    throw WebConfigError("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return config;
}

namespace {

// A private key's file should be the owner's alone. A service run as a systemd dynamic user
// reads a 0600 root:root key through LoadCredential=, so nothing needs it wider.
void warnAboutAReadableKey(WebConfig& config) {
  if (!config.tls || config.tls->keyFile.empty()) return;
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::perms p = fs::status(config.tls->keyFile, error).permissions();
  if (error) return;
  const fs::perms others = fs::perms::group_all | fs::perms::others_all;
  if ((p & others) == fs::perms::none) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(p) & 07777U);
  config.warnings.push_back(
      "tls_server_config.key_file " + config.tls->keyFile.string() +
      " may be read by users other than its owner (mode " + mode +
      "): make it 0600 and hand it to the service with LoadCredential= (see README.Debian)");
}

}  // namespace

WebConfig loadWebConfig(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw WebConfigError("--web.config.file " + file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw WebConfigError("--web.config.file " + file.string() + ": cannot be read");
  try {
    WebConfig config = parseWebConfig(text.str(), std::filesystem::absolute(file).parent_path());
    warnAboutAReadableKey(config);
    return config;
  } catch (const WebConfigError& e) {
    throw WebConfigError("--web.config.file " + file.string() + ": " + e.what());
  }
}

}  // namespace idem

#include "gateway_lookup.hpp"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "idem/bounded_transaction.hpp"
#include "idem/command_line.hpp"
#include "idem/currencies.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "idem/hex.hpp"

namespace idem::ctl {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// The configuration

constexpr std::array<std::string_view, 19> kTopKeys{
    "gateway", "biz_types",       "url",         "method",  "body",       "content_type",
    "headers", "credentials_dir", "credentials", "timeout", "rate_limit", "max_per_round",
    "retries", "ca_file",         "status",      "amount",  "currency",   "reference",
    "kind"};
// The bodies a POST lookup may send, and so how {key} and {biz_id} are escaped in them.
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kForm = "application/x-www-form-urlencoded";
constexpr std::array<std::string_view, 4> kKinds{"DEBIT", "CAPTURE", "REFUND", "CREDIT"};
// Headers idemctl writes itself: a configuration that set them would break the exchange.
constexpr std::array<std::string_view, 5> kOwnHeaders{"host", "content-length", "transfer-encoding",
                                                      "connection", "upgrade"};
constexpr std::size_t kBodyLimit = std::size_t{1024} * 1024;
constexpr milliseconds kLongestRetryAfter{60'000};
constexpr int kNotesShown = 20;

template <std::size_t N>
std::string joined(const std::array<std::string_view, N>& names) {
  std::string text;
  for (std::string_view n : names) {
    if (!text.empty()) text += ", ";
    text += n;
  }
  return text;
}

class ConfigReader {
 public:
  explicit ConfigReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& key,
                         const std::string& problem) const {
    std::string where = file_;
    if (!mark.is_null()) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    throw UsageError(where + ": " + (key.empty() ? std::string() : key + ": ") + problem);
  }

  std::string text(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node.Mark(), key, "expected a text");
    return node.Scalar();
  }
  std::string nonEmpty(const YAML::Node& node, const std::string& key) const {
    std::string t = text(node, key);
    if (t.empty()) fail(node.Mark(), key, "empty");
    return t;
  }
  long long integer(const YAML::Node& node, const std::string& key, long long min,
                    long long max) const {
    const std::string t = text(node, key);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno != 0) {
      fail(node.Mark(), key, "expected a whole number, got '" + t + "'");
    }
    if (v < min || v > max) {
      fail(node.Mark(), key,
           "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + t);
    }
    return v;
  }
  std::vector<std::string> texts(const YAML::Node& node, const std::string& key) const {
    std::vector<std::string> out;
    if (node.IsScalar()) {
      out.push_back(nonEmpty(node, key));
      return out;
    }
    if (!node.IsSequence()) fail(node.Mark(), key, "expected a list of texts");
    for (const YAML::Node& item : node) out.push_back(nonEmpty(item, key));
    return out;
  }
  void onlyKeys(const YAML::Node& map, const std::string& where,
                std::initializer_list<std::string_view> known) const {
    if (!map.IsMap()) fail(map.Mark(), where, "expected a mapping");
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string names;
        for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
        fail(entry.first.Mark(), where + "." + key, "unknown key (known: " + names + ")");
      }
    }
  }
  YAML::Node required(const YAML::Node& map, const std::string& key,
                      const std::string& where) const {
    const YAML::Node node = map[key];
    if (!node) fail(map.Mark(), where.empty() ? key : where + "." + key, "is required");
    return node;
  }
  AnswerField field(const YAML::Node& map, const std::string& key) const {
    const YAML::Node node = required(map, "pointer", key);
    AnswerField f{nonEmpty(node, key + ".pointer")};
    try {
      (void)Json::json_pointer(f.pointer);
    } catch (const Json::exception&) {
      fail(node.Mark(), key + ".pointer",
           "'" + f.pointer + "' is not a JSON pointer (such as /status or /data/0/amount)");
    }
    return f;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::string readCredential(const ConfigReader& reader, const YAML::Mark& mark,
                           const std::string& key, const std::string& name,
                           const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) reader.fail(mark, key, "credential " + name + ": cannot read " + path);
  std::ostringstream content;
  content << in.rdbuf();
  std::string value = content.str();
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  if (value.empty()) reader.fail(mark, key, "credential " + name + ": " + path + " is empty");
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      reader.fail(mark, key,
                  "credential " + name + ": " + path +
                      " holds a control character or a second line; a header value cannot");
    }
  }
  return value;
}

struct CredentialSources {
  std::optional<std::string> dir;
  std::map<std::string, std::string> files;
};

// The header value with each ${credential:NAME} replaced by the credential's text.
std::string expandCredentials(const ConfigReader& reader, const YAML::Node& node,
                              const std::string& key, const CredentialSources& sources) {
  const std::string value = reader.text(node, key);
  std::string out;
  std::size_t at = 0;
  while (at < value.size()) {
    const std::size_t open = value.find("${", at);
    if (open == std::string::npos) {
      out += value.substr(at);
      break;
    }
    out += value.substr(at, open - at);
    const std::size_t close = value.find('}', open);
    constexpr std::string_view kPrefix = "${credential:";
    if (close == std::string::npos || value.compare(open, kPrefix.size(), kPrefix) != 0) {
      reader.fail(node.Mark(), key, "only ${credential:NAME} may be written in ${...}");
    }
    const std::string name = value.substr(open + kPrefix.size(), close - open - kPrefix.size());
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      reader.fail(node.Mark(), key, "a credential's name is a file name, got '" + name + "'");
    }
    std::string path;
    if (const auto it = sources.files.find(name); it != sources.files.end()) {
      path = it->second;
    } else if (sources.dir) {
      path = *sources.dir + "/" + name;
    } else if (const char* systemd = std::getenv("CREDENTIALS_DIRECTORY");
               systemd != nullptr && *systemd != '\0') {
      path = std::string(systemd) + "/" + name;
    } else {
      reader.fail(node.Mark(), key,
                  "credential " + name +
                      ": neither credentials_dir, a credentials entry nor systemd's "
                      "CREDENTIALS_DIRECTORY says where it is");
    }
    out += readCredential(reader, node.Mark(), key, name, path);
    at = close + 1;
  }
  return out;
}

bool isToken(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// Reads url into c; whether its path or query names {key} or {biz_id}.
bool readUrl(const ConfigReader& reader, const YAML::Node& node, LookupConfig& c) {
  const std::string url = reader.nonEmpty(node, "url");
  auto bad = [&](const std::string& problem) { reader.fail(node.Mark(), "url", problem); };
  if (url.find("${") != std::string::npos) {
    bad("credentials never go in the url (it is printed in messages): put them in a header");
  }
  const std::size_t schemeEnd = url.find("://");
  if (schemeEnd == std::string::npos) bad("expected http://HOST[:PORT]/PATH or https://...");
  c.scheme = url.substr(0, schemeEnd);
  std::transform(c.scheme.begin(), c.scheme.end(), c.scheme.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c.scheme != "http" && c.scheme != "https") bad("the scheme must be http or https");
  const std::size_t hostStart = schemeEnd + 3;
  std::size_t pathStart = url.find_first_of("/?", hostStart);
  if (pathStart == std::string::npos) pathStart = url.size();
  const std::string authority = url.substr(hostStart, pathStart - hostStart);
  if (authority.find('@') != std::string::npos) {
    bad("credentials never go in the url (it is printed in messages): put them in a header");
  }
  std::string portText;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t end = authority.find(']');
    if (end == std::string::npos) bad("an IPv6 address in [...] is not closed");
    c.host = authority.substr(1, end - 1);
    if (end + 1 < authority.size()) {
      if (authority[end + 1] != ':') bad("expected :PORT after the address");
      portText = authority.substr(end + 2);
    }
  } else {
    const std::size_t colon = authority.find(':');
    c.host = authority.substr(0, colon);
    if (colon != std::string::npos) portText = authority.substr(colon + 1);
  }
  if (c.host.empty()) bad("no host");
  if (!portText.empty()) {
    const bool digits = std::all_of(portText.begin(), portText.end(), [](char ch) {
      return std::isdigit(static_cast<unsigned char>(ch)) != 0;
    });
    if (!digits || portText.size() > 5 || std::stoi(portText) < 1 || std::stoi(portText) > 65535) {
      bad("the port must be 1 to 65535, got '" + portText + "'");
    }
    c.port = portText;
  } else {
    c.port = c.scheme == "https" ? "443" : "80";
  }
  c.target = pathStart < url.size() ? url.substr(pathStart) : "/";
  if (c.target.front() == '?') c.target.insert(0, "/");
  if (c.target.find('#') != std::string::npos) bad("a fragment (#...) is never sent");
  bool named = false;
  for (std::size_t at = c.target.find('{'); at != std::string::npos;
       at = c.target.find('{', at + 1)) {
    const std::size_t close = c.target.find('}', at);
    const std::string name =
        close == std::string::npos ? std::string() : c.target.substr(at + 1, close - at - 1);
    if (name != "key" && name != "biz_id") {
      bad("only {key} and {biz_id} may be written in braces");
    }
    named = true;
  }
  for (const char ch : c.target) {
    if (static_cast<unsigned char>(ch) <= 0x20 || static_cast<unsigned char>(ch) >= 0x7f) {
      bad("a space or a character outside ASCII: write it percent-encoded");
    }
  }
  return named;
}

double readRate(const ConfigReader& reader, const YAML::Node& node) {
  const std::string text = reader.nonEmpty(node, "rate_limit");
  const std::size_t slash = text.find('/');
  auto bad = [&] {
    reader.fail(node.Mark(), "rate_limit",
                "expected N/s, N/m or N/h (N a positive number), got '" + text + "'");
  };
  if (slash == std::string::npos) bad();
  const std::string number = text.substr(0, slash);
  const std::string unit = text.substr(slash + 1);
  char* end = nullptr;
  const double n = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(n) || n <= 0) bad();
  if (unit == "s") return n;
  if (unit == "m") return n / 60;
  if (unit == "h") return n / 3600;
  bad();
  return 0;
}

std::unique_ptr<net::ssl::context> makeTlsContext(const std::optional<std::string>& caFile) {
  auto tls = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
  tls->set_verify_mode(net::ssl::verify_peer);
  if (caFile) {
    tls->load_verify_file(*caFile);
  } else {
    tls->set_default_verify_paths();
  }
  return tls;
}

}  // namespace

LookupConfig loadLookupConfig(const std::string& path) {
  ConfigReader reader(path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError(path + ": cannot open the lookup configuration");
  } catch (const YAML::ParserException& e) {
    reader.fail(e.mark, "", "not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) reader.fail(root.Mark(), "", "the configuration is not a YAML mapping");
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      reader.fail(entry.first.Mark(), key, "unknown key (known: " + joined(kTopKeys) + ")");
    }
  }
  LookupConfig c;
  c.file = path;

  const YAML::Node gateway = reader.required(root, "gateway", "");
  c.gateway = reader.nonEmpty(gateway, "gateway");
  if (c.gateway.size() > 64 || !std::all_of(c.gateway.begin(), c.gateway.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '.' ||
               ch == '-';
      })) {
    reader.fail(gateway.Mark(), "gateway", "1 to 64 characters of A-Z a-z 0-9 _ . -");
  }
  c.bizTypes = reader.texts(reader.required(root, "biz_types", ""), "biz_types");
  if (c.bizTypes.empty()) reader.fail(root["biz_types"].Mark(), "biz_types", "empty");
  const YAML::Node url = reader.required(root, "url", "");
  const bool urlNamesRecord = readUrl(reader, url, c);

  CredentialSources sources;
  if (const YAML::Node dir = root["credentials_dir"]) {
    sources.dir = reader.nonEmpty(dir, "credentials_dir");
  }
  if (const YAML::Node files = root["credentials"]) {
    if (!files.IsMap()) reader.fail(files.Mark(), "credentials", "expected a mapping NAME: FILE");
    for (const auto& entry : files) {
      const std::string name = entry.first.Scalar();
      sources.files[name] = reader.nonEmpty(entry.second, "credentials." + name);
    }
  }
  // A POST asks with a body (a gateway whose status query takes one); a GET never carries one.
  if (const YAML::Node method = root["method"]) {
    const std::string m = reader.text(method, "method");
    if (m != "GET" && m != "POST") {
      reader.fail(method.Mark(), "method",
                  "a status lookup reads: GET, or POST for a gateway whose query takes a body, "
                  "got '" +
                      m + "'");
    }
    c.post = m == "POST";
  }
  const YAML::Node body = root["body"];
  if (c.post && !body) reader.fail(root["method"].Mark(), "method", "POST needs a body");
  if (!c.post && body) reader.fail(body.Mark(), "body", "a GET carries no body: method: POST");
  bool bodyNamesRecord = false;
  if (body) {
    c.body = expandCredentials(reader, body, "body", sources);
    bodyNamesRecord =
        c.body.find("{key}") != std::string::npos || c.body.find("{biz_id}") != std::string::npos;
    c.contentType = std::string(kJson);
    if (const YAML::Node type = root["content_type"]) {
      c.contentType = reader.text(type, "content_type");
      if (c.contentType != kJson && c.contentType != kForm) {
        reader.fail(type.Mark(), "content_type",
                    "application/json or application/x-www-form-urlencoded (how {key} and "
                    "{biz_id} are escaped in the body), got '" +
                        c.contentType + "'");
      }
    }
  } else if (const YAML::Node type = root["content_type"]) {
    reader.fail(type.Mark(), "content_type", "only with a body");
  }
  if (!urlNamesRecord && !bodyNamesRecord) {
    reader.fail(url.Mark(), "url",
                std::string("names neither {key} nor {biz_id}") +
                    (c.post ? ", nor does the body" : "") +
                    ": every record would be asked the same");
  }

  if (const YAML::Node headers = root["headers"]) {
    if (!headers.IsMap()) reader.fail(headers.Mark(), "headers", "expected a mapping NAME: VALUE");
    for (const auto& entry : headers) {
      const std::string name = entry.first.Scalar();
      const std::string key = "headers." + name;
      if (!isToken(name)) reader.fail(entry.first.Mark(), key, "not a header name");
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (std::find(kOwnHeaders.begin(), kOwnHeaders.end(), lower) != kOwnHeaders.end() ||
          (c.post && lower == "content-type")) {
        reader.fail(entry.first.Mark(), key,
                    lower == "content-type" ? "a POST's Content-Type is content_type"
                                            : "idemctl sets this header itself");
      }
      std::string value = expandCredentials(reader, entry.second, key, sources);
      if (std::any_of(value.begin(), value.end(),
                      [](char ch) { return ch == '\r' || ch == '\n' || ch == '\0'; })) {
        reader.fail(entry.second.Mark(), key, "a header value is one line");
      }
      c.headers.emplace_back(name, std::move(value));
    }
  }

  if (const YAML::Node timeout = root["timeout"]) {
    const std::string text = reader.nonEmpty(timeout, "timeout");
    const std::optional<milliseconds> d = parseDuration(text);
    if (!d || d->count() <= 0 || *d > milliseconds(300'000)) {
      reader.fail(timeout.Mark(), "timeout",
                  "expected a duration from 1ms to 5m such as 500ms or 5s, got '" + text + "'");
    }
    c.timeout = *d;
  }
  if (const YAML::Node rate = root["rate_limit"]) c.ratePerSecond = readRate(reader, rate);
  if (const YAML::Node max = root["max_per_round"]) {
    c.maxPerRound = static_cast<int>(reader.integer(max, "max_per_round", 1, 100'000));
  }
  if (const YAML::Node retries = root["retries"]) {
    c.retries = static_cast<int>(reader.integer(retries, "retries", 0, 10));
  }
  if (const YAML::Node ca = root["ca_file"]) {
    c.caFile = reader.nonEmpty(ca, "ca_file");
    if (c.scheme != "https") reader.fail(ca.Mark(), "ca_file", "only for an https url");
    try {
      (void)makeTlsContext(c.caFile);
    } catch (const std::exception&) {
      reader.fail(ca.Mark(), "ca_file", "cannot load certificates from " + *c.caFile);
    }
  }

  const YAML::Node status = reader.required(root, "status", "");
  reader.onlyKeys(status, "status", {"pointer", "happened", "not_happened", "not_found_status"});
  c.status = reader.field(status, "status");
  c.happened = reader.texts(reader.required(status, "happened", "status"), "status.happened");
  if (const YAML::Node no = status["not_happened"]) {
    c.notHappened = reader.texts(no, "status.not_happened");
    for (const std::string& value : c.notHappened) {
      if (std::find(c.happened.begin(), c.happened.end(), value) != c.happened.end()) {
        reader.fail(no.Mark(), "status.not_happened", "'" + value + "' is in status.happened too");
      }
    }
  }
  if (const YAML::Node nf = status["not_found_status"]) {
    c.notFoundStatus =
        static_cast<unsigned>(reader.integer(nf, "status.not_found_status", 400, 499));
  }
  const YAML::Node amount = reader.required(root, "amount", "");
  reader.onlyKeys(amount, "amount", {"pointer", "unit"});
  c.amount = reader.field(amount, "amount");
  if (const YAML::Node unit = amount["unit"]) {
    const std::string u = reader.text(unit, "amount.unit");
    if (u != "minor" && u != "major") {
      reader.fail(unit.Mark(), "amount.unit",
                  "minor (2990 for 29.90) or major (29.90), got '" + u + "'");
    }
    c.amountInMajorUnits = u == "major";
  }
  const YAML::Node currency = reader.required(root, "currency", "");
  reader.onlyKeys(currency, "currency", {"pointer"});
  c.currency = reader.field(currency, "currency");
  const YAML::Node reference = reader.required(root, "reference", "");
  reader.onlyKeys(reference, "reference", {"pointer"});
  c.reference = reader.field(reference, "reference");
  if (const YAML::Node kind = root["kind"]) {
    c.kind = reader.text(kind, "kind");
    if (std::find(kKinds.begin(), kKinds.end(), *c.kind) == kKinds.end()) {
      reader.fail(kind.Mark(), "kind", "one of " + joined(kKinds) + ", got '" + *c.kind + "'");
    }
  }
  return c;
}

namespace {

// ---------------------------------------------------------------------------------------------
// One HTTP exchange

std::string urlEncoded(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0x0f];
    }
  }
  return out;
}

std::string expandTarget(const std::string& target, const std::string& key,
                         const std::string& bizId) {
  std::string out;
  for (std::size_t at = 0; at < target.size();) {
    if (target.compare(at, 5, "{key}") == 0) {
      out += urlEncoded(key);
      at += 5;
    } else if (target.compare(at, 8, "{biz_id}") == 0) {
      out += urlEncoded(bizId);
      at += 8;
    } else {
      out += target[at++];
    }
  }
  return out;
}

// A POST body's {key} and {biz_id}: as JSON string characters (the template writes the quotes) or
// URL-encoded for a form.
std::string expandBody(const LookupConfig& c, const std::string& key, const std::string& bizId) {
  const auto escaped = [&](const std::string& value) {
    if (c.contentType == kForm) return urlEncoded(value);
    const std::string quoted = Json(value).dump();
    return quoted.substr(1, quoted.size() - 2);
  };
  std::string out;
  for (std::size_t at = 0; at < c.body.size();) {
    if (c.body.compare(at, 5, "{key}") == 0) {
      out += escaped(key);
      at += 5;
    } else if (c.body.compare(at, 8, "{biz_id}") == 0) {
      out += escaped(bizId);
      at += 8;
    } else {
      out += c.body[at++];
    }
  }
  return out;
}

bool isAddress(const std::string& host) {
  boost::system::error_code ec;
  (void)net::ip::make_address(host, ec);
  return !ec;
}

struct Attempt {
  unsigned status = 0;  // 0: no answer
  std::string body;
  std::optional<milliseconds> retryAfter;
  std::string error;  // why there is no answer
  bool retryable = false;
};

std::optional<milliseconds> retryAfterOf(std::string_view value) {
  std::string text(value);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.pop_back();
  }
  if (text.empty()) return std::nullopt;
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    if (text.size() > 6) return kLongestRetryAfter * 2;
    return milliseconds(std::stoll(text) * 1000);
  }
  std::tm when{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &when);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const std::time_t at = timegm(&when);
  const std::time_t now = std::time(nullptr);
  return milliseconds(std::max<std::time_t>(0, at - now) * 1000);
}

struct Exchange {
  const LookupConfig& config;
  net::ssl::context* tls;
  http::request<http::string_body> request;
  Clock::time_point deadline;
  std::string verifyNote;
  Attempt result;
};

std::string timedOutText(const LookupConfig& c) {
  return "no answer within " + formatDuration(c.timeout);
}

bool isHttpError(const boost::system::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::end_of_stream).category();
}

template <typename Stream>
net::awaitable<void> sendAndRead(Stream& stream, Exchange& x) {
  boost::system::error_code ec;
  co_await http::async_write(stream, x.request, net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    x.result.error = ec == beast::error::timeout ? timedOutText(x.config)
                                                 : "cannot send the request: " + ec.message();
    x.result.retryable = true;
    co_return;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
  if (ec == beast::error::timeout) {
    x.result.error = timedOutText(x.config);
    x.result.retryable = true;
    co_return;
  }
  if (ec == http::error::body_limit) {
    x.result.error = "answered more than 1 MiB";
    co_return;
  }
  if (ec && isHttpError(ec) && ec != http::error::end_of_stream) {
    x.result.error = "answered what is not HTTP: " + ec.message();
    co_return;
  }
  if (ec) {
    x.result.error = "the connection failed before the answer: " + ec.message();
    x.result.retryable = true;
    co_return;
  }
  const auto& response = parser.get();
  x.result.status = response.result_int();
  x.result.body = response.body();
  if (const auto it = response.find(http::field::retry_after); it != response.end()) {
    x.result.retryAfter = retryAfterOf(std::string(it->value()));
  }
}

net::awaitable<void> exchangeOnce(net::io_context& io, Exchange& x) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  net::steady_timer guard(io);
  bool resolveTimedOut = false;
  guard.expires_at(x.deadline);
  guard.async_wait([&resolver, &resolveTimedOut](const boost::system::error_code& e) {
    if (!e) {
      resolveTimedOut = true;
      resolver.cancel();
    }
  });
  const tcp::resolver::results_type endpoints = co_await resolver.async_resolve(
      x.config.host, x.config.port, net::redirect_error(net::use_awaitable, ec));
  guard.cancel();
  if (ec) {
    x.result.error = resolveTimedOut ? timedOutText(x.config)
                                     : "cannot resolve " + x.config.host + ": " + ec.message();
    x.result.retryable = true;
    co_return;
  }
  auto connectFailed = [&x](const boost::system::error_code& e) {
    x.result.error = e == beast::error::timeout ? timedOutText(x.config)
                                                : "cannot connect to " + x.config.host + ":" +
                                                      x.config.port + ": " + e.message();
    x.result.retryable = true;
  };
  if (x.tls == nullptr) {
    beast::tcp_stream stream(io);
    stream.expires_at(x.deadline);
    co_await stream.async_connect(endpoints, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      connectFailed(ec);
      co_return;
    }
    co_await sendAndRead(stream, x);
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> stream(io, *x.tls);
  const std::string& host = x.config.host;
  if (!isAddress(host)) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());
  stream.set_verify_mode(net::ssl::verify_peer);
  stream.set_verify_callback([&x, host](bool preverified, net::ssl::verify_context& context) {
    const bool ok = net::ssl::host_name_verification(host)(preverified, context);
    if (!ok && x.verifyNote.empty()) {
      X509_STORE_CTX* store = context.native_handle();
      x.verifyNote = preverified
                         ? "the certificate does not name " + host
                         : std::string("the certificate is not trusted (") +
                               X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)) + ")";
    }
    return ok;
  });
  beast::tcp_stream& lowest = beast::get_lowest_layer(stream);
  lowest.expires_at(x.deadline);
  co_await lowest.async_connect(endpoints, net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    connectFailed(ec);
    co_return;
  }
  co_await stream.async_handshake(net::ssl::stream_base::client,
                                  net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    if (ec == beast::error::timeout) {
      x.result.error = timedOutText(x.config);
      x.result.retryable = true;
    } else {
      // Not retried: a certificate that is not trusted now will not be the next second.
      x.result.error = "TLS handshake with " + host +
                       " failed: " + (x.verifyNote.empty() ? ec.message() : x.verifyNote);
    }
    co_return;
  }
  co_await sendAndRead(stream, x);
  lowest.socket().shutdown(tcp::socket::shutdown_both, ec);
}

Attempt exchange(const LookupConfig& config, net::ssl::context* tls, const std::string& target,
                 const std::string& body) {
  Exchange x{config, tls, {}, Clock::now() + config.timeout, {}, {}};
  x.request.method(config.post ? http::verb::post : http::verb::get);
  x.request.target(target);
  x.request.version(11);
  const bool defaultPort = (config.scheme == "https" && config.port == "443") ||
                           (config.scheme == "http" && config.port == "80");
  const std::string host =
      config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host;
  x.request.set(http::field::host, defaultPort ? host : host + ":" + config.port);
  x.request.set(http::field::user_agent, std::string("idemctl/") + IDEMWATCH_VERSION);
  x.request.set(http::field::accept, "application/json");
  x.request.set(http::field::connection, "close");
  for (const auto& [name, value] : config.headers) x.request.set(name, value);
  if (config.post) {
    x.request.set(http::field::content_type, config.contentType);
    x.request.body() = body;
    x.request.prepare_payload();
  }
  net::io_context io;
  std::string failure;
  net::co_spawn(io, exchangeOnce(io, x), [&failure](const std::exception_ptr& e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& error) {
      failure = error.what();
    }
  });
  io.run();
  if (!failure.empty() && x.result.error.empty() && x.result.status == 0) {
    x.result.error = failure;
    x.result.retryable = true;
  }
  return x.result;
}

// One request at a time, at most `rate` a second on average, a burst of at most max(1, rate).
class TokenBucket {
 public:
  explicit TokenBucket(double rate) : rate_(rate), burst_(std::max(1.0, rate)), tokens_(burst_) {}
  // False when stopped while waiting.
  bool take(const std::atomic<bool>& stop) {
    for (;;) {
      const auto now = Clock::now();
      const std::chrono::duration<double> elapsed = now - last_;
      last_ = now;
      tokens_ = std::min(burst_, tokens_ + elapsed.count() * rate_);
      if (tokens_ >= 1) {
        tokens_ -= 1;
        return true;
      }
      if (stop.load()) return false;
      const double wait = std::min(0.1, (1 - tokens_) / rate_);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
  }

 private:
  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point last_ = Clock::now();
};

bool sleepUnlessStopped(milliseconds d, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + d;
  while (!stop.load() && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), milliseconds(100)));
  }
  return !stop.load();
}

// ---------------------------------------------------------------------------------------------
// What an answer says

struct Reading {
  std::optional<bool> happened;  // nullopt with error empty: the gateway does not know
  std::optional<std::int64_t> amountMinor;
  std::optional<std::string> currency;
  std::optional<std::string> reference;
  std::string payload;  // the answer as the database keeps it (JSON)
  std::string error;    // not readable: decides nothing
};

std::optional<std::string> textAt(const Json& body, const std::string& pointer) {
  try {
    const Json& value = body.at(Json::json_pointer(pointer));
    if (value.is_string()) return value.get<std::string>();
    if (value.is_number() || value.is_boolean()) return value.dump();
    return std::nullopt;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

Reading read(const LookupConfig& c, unsigned status, const std::string& body) {
  Reading r;
  Json parsed = Json::parse(body, nullptr, false);
  r.payload = Json{{"http_status", status},
                   {"body", parsed.is_discarded() ? Json(body.substr(0, 4096)) : parsed}}
                  .dump();
  if (c.notFoundStatus && status == *c.notFoundStatus) {
    r.happened = false;
    return r;
  }
  if (status < 200 || status > 299) {
    r.error = "answered HTTP " + std::to_string(status);
    return r;
  }
  if (parsed.is_discarded()) {
    r.error = "answered what is not JSON";
    return r;
  }
  const std::optional<std::string> value = textAt(parsed, c.status.pointer);
  if (!value) {
    r.error = "the answer has no " + c.status.pointer;
    return r;
  }
  if (std::find(c.notHappened.begin(), c.notHappened.end(), *value) != c.notHappened.end()) {
    r.happened = false;
    return r;
  }
  if (std::find(c.happened.begin(), c.happened.end(), *value) == c.happened.end()) {
    return r;  // the gateway does not know (yet)
  }
  r.happened = true;
  std::optional<std::string> currency = textAt(parsed, c.currency.pointer);
  if (!currency) {
    r.error = "says " + *value + " but has no currency at " + c.currency.pointer;
    return r;
  }
  std::transform(currency->begin(), currency->end(), currency->begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  if (!isIso4217(*currency)) {
    r.error = "says " + *value + " in '" + *currency + "', not an ISO 4217 currency";
    return r;
  }
  r.currency = currency;
  const std::optional<std::string> amount = textAt(parsed, c.amount.pointer);
  if (!amount) {
    r.error = "says " + *value + " but has no amount at " + c.amount.pointer;
    return r;
  }
  try {
    if (c.amountInMajorUnits) {
      r.amountMinor = parseMinorUnits(*amount, *currency);
    } else {
      std::size_t used = 0;
      const long long minor = std::stoll(*amount, &used, 10);
      if (used != amount->size()) throw std::invalid_argument("not a whole number");
      r.amountMinor = minor;
    }
  } catch (const std::exception& e) {
    r.error = "says " + *value + " with the amount '" + amount->substr(0, 40) + "', which is not " +
              (c.amountInMajorUnits ? "an amount of " + *currency + ": " + e.what()
                                    : std::string("a whole number of minor units"));
    return r;
  }
  r.reference = textAt(parsed, c.reference.pointer);
  if (!r.reference || r.reference->empty()) {
    r.error = "says " + *value + " but has no reference at " + c.reference.pointer;
    return r;
  }
  return r;
}

std::string answerId(const std::string& key) {
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::string id = "lookup:" + key + ":" + std::to_string(ms);
  if (id.size() <= 255) return id;
  // A long key: its SHA-256 instead, so that the id stays within the 255 characters allowed.
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(key.data(), key.size(), digest.data(), &length, EVP_sha256(), nullptr);
  const std::string hex = hexEncode(digest.data(), length);
  return "lookup:sha256:" + hex + ":" + std::to_string(ms);
}

// The UNKNOWN records of the business types: those never asked first, then those asked longest
// ago, then the oldest, so that a record the gateway cannot answer does not keep the others out.
constexpr const char* kUnknownRecords =
    "SELECT r.idempotency_key, r.biz_id, (idem.business_type(r.biz_type)).effect_kinds[1] "
    "FROM idem.records AS r "
    "WHERE r.status = 'UNKNOWN' "
    "AND r.biz_type IN (SELECT jsonb_array_elements_text($1::jsonb)) "
    "ORDER BY (SELECT max(e.received_at) FROM idem.gateway_events AS e "
    "WHERE e.record_key = r.idempotency_key AND e.source = 'lookup' AND e.gateway = $2) "
    "NULLS FIRST, r.created_at, r.idempotency_key LIMIT $3";

constexpr const char* kRecordAnswer =
    "SELECT result, record_status "
    "FROM idem.record_lookup_answer($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)";
// What matching found, in a statement of its own: the answer's row is not in the snapshot of the
// statement that wrote it.
constexpr const char* kAnswerDetail =
    "SELECT detail FROM idem.gateway_events WHERE gateway = $1 AND source = 'lookup' "
    "AND event_id = $2";

}  // namespace

struct GatewayLookup::State {
  LookupConfig config;
  std::unique_ptr<net::ssl::context> tls;
  TokenBucket bucket;
  explicit State(LookupConfig c) : config(std::move(c)), bucket(config.ratePerSecond) {
    if (config.scheme == "https") tls = makeTlsContext(config.caFile);
  }

  // The gateway's answer about one record, retried on what may pass.
  Attempt ask(const std::string& target, const std::string& body, const std::atomic<bool>& stop) {
    Attempt last;
    for (int attempt = 0; attempt <= config.retries; ++attempt) {
      if (!bucket.take(stop)) {
        last.error = "stopped";
        return last;
      }
      last = exchange(config, tls.get(), target, body);
      const bool busy = last.status == 429 || (last.status >= 500 && last.status <= 599);
      if (!last.retryable && !busy) return last;
      if (attempt == config.retries) break;
      milliseconds wait = milliseconds(250) * (1 << attempt);
      if (last.retryAfter) {
        if (*last.retryAfter > kLongestRetryAfter) {
          last.error = "answered HTTP " + std::to_string(last.status) + " asking to retry after " +
                       formatDuration(*last.retryAfter) + ", longer than idemctl waits";
          last.status = 0;
          return last;
        }
        wait = std::max(wait, *last.retryAfter);
      }
      if (!sleepUnlessStopped(wait, stop)) return last;
    }
    return last;
  }
};

GatewayLookup::GatewayLookup(LookupConfig config)
    : state_(std::make_unique<State>(std::move(config))) {}
GatewayLookup::~GatewayLookup() = default;
const LookupConfig& GatewayLookup::config() const {
  return state_->config;
}

LookupRound GatewayLookup::runRound(pqxx::connection& reader, pqxx::connection& ledger,
                                    const std::atomic<bool>& stop) {
  const LookupConfig& c = state_->config;
  LookupRound round;
  struct Unknown {
    std::string key, bizId;
    std::optional<std::string>
        effectKind;  // its business type's side effect, if the ledger has one
  };
  std::vector<Unknown> records;
  translatingErrors("lookup", [&] {
    Work tx(reader);
    for (const pqxx::row& r :
         tx.exec_params(kUnknownRecords, Json(c.bizTypes).dump(), c.gateway, c.maxPerRound)) {
      records.push_back({r[0].c_str(), r[1].c_str(),
                         r[2].is_null() ? std::nullopt : std::optional<std::string>(r[2].c_str())});
    }
    tx.commit();
  });
  const std::string origin = c.scheme + "://" +
                             (c.host.find(':') != std::string::npos ? "[" + c.host + "]" : c.host) +
                             ":" + c.port;
  for (const auto& record : records) {
    const std::string& key = record.key;
    const std::string& bizId = record.bizId;
    const std::optional<std::string> kind = c.kind ? c.kind : record.effectKind;
    if (stop.load()) break;
    ++round.asked;
    const std::string target = expandTarget(c.target, key, bizId);
    const Attempt attempt =
        state_->ask(target, c.post ? expandBody(c, key, bizId) : std::string(), stop);
    const std::string where = (c.post ? "POST " : "GET ") + origin + target;
    auto error = [&](const std::string& what) {
      ++round.errors;
      round.notes.push_back(key + ": error: " + where + ": " + what + "; decides nothing");
    };
    if (attempt.status == 0) {
      error(attempt.error.empty() ? "no answer" : attempt.error);
      continue;
    }
    const Reading reading = read(c, attempt.status, attempt.body);
    if (!reading.error.empty()) {
      error(reading.error);
      continue;
    }
    std::string result, status, detail;
    try {
      Work tx(ledger);
      const std::string id = answerId(key);
      const pqxx::row row = tx.exec_params1(kRecordAnswer, c.gateway, key, id, reading.happened,
                                            reading.happened.value_or(false) ? kind : std::nullopt,
                                            reading.amountMinor, reading.currency,
                                            reading.reference, reading.payload);
      result = row[0].c_str();
      status = row[1].is_null() ? std::string() : row[1].c_str();
      const pqxx::row about = tx.exec_params1(kAnswerDetail, c.gateway, id);
      detail = about[0].c_str();
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      const std::string& state = e.sqlstate();
      if (state.rfind("22", 0) != 0 && state.rfind("23", 0) != 0) rethrowAsDatabaseError("lookup");
      std::string what = e.what();
      what = what.substr(0, what.find('\n'));
      error("the database refused the answer: " + what);
      continue;
    } catch (...) {
      rethrowAsDatabaseError("lookup");
    }
    if (!reading.happened) {
      ++round.unknown;
    } else if (*reading.happened) {
      ++round.succeeded;
      if (status == "SUCCESS") ++round.resolvedSuccess;
      if (result == "mismatched") {
        ++round.mismatched;
        round.notes.push_back(key + ": mismatched: " + detail + "; a person decides");
      }
    } else {
      ++round.failed;
      if (status == "FAILED") {
        ++round.resolvedFailed;
      } else if (status == "UNKNOWN") {
        round.notes.push_back(key + ": the gateway says it did not happen; " + detail);
      }
    }
  }
  return round;
}

void printLookupRound(std::ostream& out, const std::string& when, const LookupRound& r) {
  out << when << " lookup: asked " << r.asked << ": succeeded " << r.succeeded << ", failed "
      << r.failed << ", unknown " << r.unknown << ", errors " << r.errors << "; resolved "
      << r.resolvedSuccess << " SUCCESS, " << r.resolvedFailed << " FAILED, mismatched "
      << r.mismatched << "\n";
  const int shown = std::min<int>(kNotesShown, static_cast<int>(r.notes.size()));
  for (int i = 0; i < shown; ++i) out << "  " << r.notes[static_cast<std::size_t>(i)] << "\n";
  if (static_cast<int>(r.notes.size()) > shown) {
    out << "  and " << static_cast<int>(r.notes.size()) - shown << " more\n";
  }
  out << std::flush;
}

}  // namespace idem::ctl

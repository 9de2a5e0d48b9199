#include "web_config.hpp"

#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

namespace idem::exporter {
namespace {

struct Line {
  int number = 0;
  int indent = 0;
  std::string key;
  std::optional<std::string> value;  // empty: a mapping follows on deeper lines
};

[[noreturn]] void fail(int line, const std::string& what) {
  throw WebConfigError("line " + std::to_string(line) + ": " + what);
}

// A plain, 'single' or "double" quoted YAML scalar.
std::string scalar(std::string text, int line) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.pop_back();
  if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
    std::string out;
    for (std::size_t i = 1; i + 1 < text.size(); ++i) {
      out += text[i];
      if (text[i] == '\'' && text[i + 1] == '\'') ++i;
    }
    return out;
  }
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    std::string out;
    for (std::size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] == '\\' && i + 2 < text.size()) {
        ++i;
        if (text[i] != '"' && text[i] != '\\' && text[i] != '/')
          fail(line, "unsupported escape \\" + std::string(1, text[i]));
      }
      out += text[i];
    }
    return out;
  }
  if (!text.empty() && (text.front() == '\'' || text.front() == '"'))
    fail(line, "unterminated quote");
  if (!text.empty() && (text.front() == '[' || text.front() == '{' || text.front() == '|' ||
                        text.front() == '>' || text.front() == '&' || text.front() == '*')) {
    fail(line, "only plain or quoted scalars are supported, not \"" + text + "\"");
  }
  return text;
}

// Drops a comment: '#' at the start or after a space, outside quotes.
std::string withoutComment(const std::string& raw) {
  char quote = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || raw[i - 1] == ' ' || raw[i - 1] == '\t')) {
      return raw.substr(0, i);
    }
  }
  return raw;
}

std::vector<Line> tokenize(std::string_view text) {
  std::vector<Line> lines;
  std::istringstream in{std::string(text)};
  std::string raw;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    std::string content = withoutComment(raw);
    if (content.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (number == 1 && content.rfind("---", 0) == 0) continue;
    Line line;
    line.number = number;
    const std::size_t first = content.find_first_not_of(' ');
    if (content[first] == '\t') fail(number, "tabs are not allowed for indentation in YAML");
    line.indent = static_cast<int>(first);
    if (content[first] == '-') fail(number, "lists are not supported here");
    while (!content.empty() && (content.back() == ' ' || content.back() == '\r'))
      content.pop_back();
    const std::size_t colon = content.find(": ", first);
    std::size_t keyEnd = colon;
    if (colon == std::string::npos) {
      if (content.back() != ':') fail(number, "expected \"key: value\"");
      keyEnd = content.size() - 1;
    }
    line.key = scalar(content.substr(first, keyEnd - first), number);
    if (line.key.empty()) fail(number, "empty key");
    if (colon != std::string::npos) {
      const std::string rest = content.substr(colon + 2);
      const std::size_t start = rest.find_first_not_of(' ');
      if (start != std::string::npos) line.value = scalar(rest.substr(start), number);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::filesystem::path resolvePath(const std::string& value, const std::filesystem::path& baseDir) {
  std::filesystem::path p(value);
  return p.is_absolute() ? p : baseDir / p;
}

void requireReadable(const std::filesystem::path& p, const std::string& key) {
  std::ifstream f(p);
  if (!f) throw WebConfigError(key + " " + p.string() + " cannot be read");
}

}  // namespace

WebConfig parseWebConfig(std::string_view text, const std::filesystem::path& baseDir) {
  WebConfig config;
  const std::vector<Line> lines = tokenize(text);
  std::map<std::string, std::string> tlsKeys;
  bool sawTls = false;
  bool sawAuth = false;
  std::size_t i = 0;
  while (i < lines.size()) {
    const Line& top = lines[i];
    if (top.indent != 0) fail(top.number, "unexpected indentation");
    ++i;
    std::map<std::string, std::string> children;
    int childIndent = -1;
    while (i < lines.size() && lines[i].indent > 0) {
      const Line& child = lines[i];
      if (childIndent < 0) childIndent = child.indent;
      if (child.indent != childIndent)
        fail(child.number, "unexpected indentation (nested mappings are not supported)");
      if (!child.value) fail(child.number, "\"" + child.key + "\" needs a value");
      if (!children.emplace(child.key, *child.value).second)
        fail(child.number, "duplicate key \"" + child.key + "\"");
      ++i;
    }
    if (top.key != "tls_server_config" && top.key != "basic_auth_users" &&
        top.key != "http_server_config") {
      fail(top.number,
           "unknown key \"" + top.key + "\" (expected tls_server_config or basic_auth_users)");
    }
    if (top.value && !top.value->empty() && *top.value != "null" && *top.value != "~" &&
        *top.value != "{}") {
      fail(top.number, "\"" + top.key + "\" must be a mapping");
    }
    if (top.key == "tls_server_config") {
      if (sawTls) fail(top.number, "duplicate key \"tls_server_config\"");
      sawTls = true;
      tlsKeys = children;
    } else if (top.key == "basic_auth_users") {
      if (sawAuth) fail(top.number, "duplicate key \"basic_auth_users\"");
      sawAuth = true;
      config.basicAuthUsers = children;
    } else if (top.key == "http_server_config") {
      if (!children.empty()) {
        throw WebConfigError("http_server_config (" + children.begin()->first +
                             ") is not supported by this exporter's web server (civetweb)");
      }
    } else {
      fail(top.number,
           "unknown key \"" + top.key + "\" (expected tls_server_config or basic_auth_users)");
    }
  }

  static const std::regex bcrypt(R"(^\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53}$)");
  for (const auto& [user, hash] : config.basicAuthUsers) {
    if (user.find(':') != std::string::npos)
      throw WebConfigError("basic_auth_users: user \"" + user + "\" must not contain ':'");
    if (!std::regex_match(hash, bcrypt)) {
      throw WebConfigError("basic_auth_users: the password of \"" + user +
                           "\" is not a bcrypt hash ($2a$, $2b$ or $2y$, as htpasswd -B makes)");
    }
  }

  if (sawTls) {
    TlsServerConfig tls;
    for (const auto& [key, value] : tlsKeys) {
      if (key == "cert_file") {
        tls.certFile = resolvePath(value, baseDir);
      } else if (key == "key_file") {
        tls.keyFile = resolvePath(value, baseDir);
      } else if (key == "client_ca_file") {
        tls.clientCaFile = resolvePath(value, baseDir);
      } else if (key == "client_auth_type") {
        if (value == "NoClientCert")
          tls.verifyPeer = "no";
        else if (value == "VerifyClientCertIfGiven")
          tls.verifyPeer = "optional";
        else if (value == "RequireAndVerifyClientCert")
          tls.verifyPeer = "yes";
        else {
          throw WebConfigError("tls_server_config.client_auth_type \"" + value +
                               "\" is not supported (NoClientCert, VerifyClientCertIfGiven or "
                               "RequireAndVerifyClientCert)");
        }
      } else if (key == "min_version") {
        static const std::map<std::string, int> versions{
            {"TLS10", 2}, {"TLS11", 3}, {"TLS12", 4}, {"TLS13", 5}};
        const auto v = versions.find(value);
        if (v == versions.end())
          throw WebConfigError("tls_server_config.min_version \"" + value +
                               "\" is not TLS10, TLS11, TLS12 or TLS13");
        tls.protocolVersion = v->second;
      } else {
        throw WebConfigError("tls_server_config." + key +
                             " is not supported by this exporter's web server (civetweb)");
      }
    }
    if (tls.certFile.empty() || tls.keyFile.empty()) {
      throw WebConfigError("tls_server_config needs both cert_file and key_file");
    }
    requireReadable(tls.certFile, "cert_file");
    requireReadable(tls.keyFile, "key_file");
    if (tls.clientCaFile) requireReadable(*tls.clientCaFile, "client_ca_file");
    if (tls.verifyPeer != "no" && !tls.clientCaFile) {
      throw WebConfigError("tls_server_config.client_auth_type needs client_ca_file");
    }
    config.tls = tls;
  }
  return config;
}

WebConfig loadWebConfig(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw WebConfigError("--web.config.file " + file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw WebConfigError("--web.config.file " + file.string() + ": cannot be read");
  try {
    return parseWebConfig(text.str(), std::filesystem::absolute(file).parent_path());
  } catch (const WebConfigError& e) {
    throw WebConfigError("--web.config.file " + file.string() + ": " + e.what());
  }
}

}  // namespace idem::exporter

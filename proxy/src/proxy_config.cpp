#include "proxy_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "idem/duration.hpp"

namespace idem::proxy {
namespace {

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": " + what);
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    const std::size_t end = std::min(path.find('/', i), path.size());
    out.push_back(path.substr(i, end - i));
    i = end;
  }
  return out;
}

bool isParameter(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

std::chrono::milliseconds duration(const YAML::Node& node, const std::string& where,
                                   std::chrono::milliseconds fallback) {
  if (!node) return fallback;
  const auto text = node.as<std::string>();
  const auto d = parseDuration(text);
  if (!d || d->count() <= 0)
    refuse(where, "'" + text + "' is not a positive duration (30s, 500ms, 2m)");
  return *d;
}

Upstream parseUpstream(const std::string& url, const std::string& where) {
  Upstream u;
  std::string_view scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    scheme = "https://";
    u.tls = true;
  } else if (url.rfind("http://", 0) != 0) {
    refuse(where, "'" + url + "' is not an http:// or https:// URL");
  }
  const std::string rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  u.basePath = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.basePath.empty() && u.basePath.back() == '/') u.basePath.pop_back();
  const std::size_t colon = authority.rfind(':');
  if (authority.empty()) refuse(where, "'" + url + "' names no host");
  if (colon == std::string::npos) {
    u.host = authority;
    u.port = u.tls ? "443" : "80";
  } else {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
    if (u.host.empty() || u.port.empty() ||
        !std::all_of(u.port.begin(), u.port.end(),
                     [](unsigned char c) { return std::isdigit(c); })) {
      refuse(where, "'" + url + "' has no valid host:port");
    }
  }
  return u;
}

// A client context that checks the server's chain (against `caFile`, else the system's
// certificates) and, per connection, its name.
std::shared_ptr<boost::asio::ssl::context> tlsContext(const std::string& caFile,
                                                      const std::string& where) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  context->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (caFile.empty()) {
    context->set_default_verify_paths(ec);
    if (ec) refuse(where, "the system's certificates do not load: " + ec.message());
  } else {
    if (!std::ifstream(caFile)) refuse(where, "upstream_ca " + caFile + " cannot be read");
    context->load_verify_file(caFile, ec);
    if (ec) refuse(where, "upstream_ca " + caFile + " holds no PEM certificate: " + ec.message());
  }
  return context;
}

// A field this file does not know is a mistake (a misspelt upstream_keepalive would otherwise
// pass unnoticed): refused, naming it and the fields that are known here.
void onlyFields(const YAML::Node& node, const std::string& where,
                std::initializer_list<std::string_view> known) {
  for (const auto& entry : node) {
    const auto field = entry.first.as<std::string>();
    if (std::find(known.begin(), known.end(), field) != known.end()) continue;
    std::string list;
    for (const auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    refuse(where, "unknown field '" + field + "' (known here: " + list + ")");
  }
}

void checkPointer(const std::string& pointer, const std::string& where) {
  if (pointer.empty() || pointer.front() != '/') {
    refuse(where, "takes a JSON pointer such as /order_id, not '" + pointer + "'");
  }
  try {
    const nlohmann::json::json_pointer parsed(pointer);
  } catch (const nlohmann::json::exception&) {
    refuse(where, "'" + pointer + "' is not a JSON pointer (RFC 6901)");
  }
}

std::map<std::string, McpTool> parseMcpTools(const YAML::Node& mcp, const std::string& where) {
  if (!mcp.IsMap() || !mcp["tools"] || !mcp["tools"].IsSequence() || mcp["tools"].size() == 0) {
    refuse(where, "mcp takes 'tools', a list of the tools whose calls are claimed");
  }
  onlyFields(mcp, where + ": mcp", {"tools"});
  std::map<std::string, McpTool> tools;
  for (std::size_t i = 0; i < mcp["tools"].size(); ++i) {
    const auto& node = mcp["tools"][i];
    const std::string at = where + ": mcp.tools[" + std::to_string(i) + "]";
    if (!node.IsMap()) refuse(at, "a tool is a mapping");
    onlyFields(node, at, {"name", "biz_type", "biz_id", "tool", "key_from_arguments", "lease"});
    McpTool t;
    for (const char* field : {"name", "biz_type", "biz_id"}) {
      if (!node[field] || node[field].as<std::string>().empty())
        refuse(at, std::string("'") + field + "' is required");
    }
    t.name = node["name"].as<std::string>();
    t.bizType = node["biz_type"].as<std::string>();
    t.bizIdPointer = node["biz_id"].as<std::string>();
    checkPointer(t.bizIdPointer, at + ": biz_id (into the call's arguments)");
    t.tool = node["tool"] ? node["tool"].as<std::string>() : t.name;
    if (node["key_from_arguments"]) {
      if (!node["key_from_arguments"].IsSequence() || node["key_from_arguments"].size() == 0)
        refuse(at, "key_from_arguments lists argument names");
      for (const auto& f : node["key_from_arguments"])
        t.keyFromArguments.push_back(f.as<std::string>());
    }
    if (node["lease"])
      t.lease = duration(node["lease"], at + ": lease", std::chrono::milliseconds{0});
    const std::string name = t.name;
    if (!tools.emplace(name, std::move(t)).second)
      refuse(at, "tool '" + name + "' is listed twice");
  }
  return tools;
}

Route parseRoute(const YAML::Node& node, std::size_t index) {
  const std::string at = "routes[" + std::to_string(index) + "]";
  if (!node.IsMap()) refuse(at, "a route is a mapping");
  Route r;
  auto required = [&](const char* field) {
    if (!node[field] || node[field].as<std::string>().empty())
      refuse(at, std::string("'") + field + "' is required");
    return node[field].as<std::string>();
  };
  r.path = required("path");
  r.name = node["name"] ? node["name"].as<std::string>() : r.path;
  const std::string where = "route '" + r.name + "'";
  if (r.path.front() != '/') refuse(where, "path must start with '/'");
  onlyFields(
      node, where,
      {"name", "path", "methods", "upstream", "upstream_ca", "upstream_timeout",
       "upstream_keepalive", "upstream_keepalive_connections", "key_required", "biz_type", "biz_id",
       "tool", "lease", "fingerprint", "max_body", "not_executed_statuses", "mcp"});
  if (node["methods"]) {
    for (const auto& m : node["methods"]) {
      std::string method = m.as<std::string>();
      std::transform(method.begin(), method.end(), method.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      r.methods.insert(method);
    }
  } else {
    r.methods = {"POST"};
  }
  r.upstream = parseUpstream(required("upstream"), where + ": upstream");
  if (node["upstream_ca"]) {
    if (!r.upstream.tls) refuse(where, "upstream_ca is for an https:// upstream");
    r.upstream.caFile = node["upstream_ca"].as<std::string>();
  }
  if (r.upstream.tls) r.upstream.context = tlsContext(r.upstream.caFile, where);
  if (node["key_required"]) r.keyRequired = node["key_required"].as<bool>();
  r.lease = duration(node["lease"], where + ": lease", r.lease);
  if (node["mcp"]) {
    r.mcpTools = parseMcpTools(node["mcp"], where);
    // GET opens a server-sent stream this proxy does not relay (answered 405); DELETE ends a
    // session and passes through.
    if (!node["methods"]) r.methods = {"POST", "GET", "DELETE"};
    for (const char* field : {"biz_type", "biz_id", "tool"}) {
      if (node[field])
        refuse(where, std::string("an MCP route sets '") + field + "' per tool, under mcp.tools");
    }
  } else {
    r.bizType = required("biz_type");
    const std::string bizId = required("biz_id");
    if (bizId.rfind("path:", 0) == 0) {
      r.bizIdParameter = bizId.substr(5);
      const auto segs = segments(r.path);
      const bool named = std::any_of(segs.begin(), segs.end(), [&](std::string_view s) {
        return isParameter(s) && s.substr(1, s.size() - 2) == *r.bizIdParameter;
      });
      if (!named)
        refuse(where,
               "biz_id names path parameter '" + *r.bizIdParameter + "', which the path lacks");
    } else if (bizId.rfind("body:", 0) == 0) {
      r.bizIdPointer = bizId.substr(5);
      checkPointer(*r.bizIdPointer, where + ": biz_id 'body:'");
    } else {
      refuse(where, "biz_id is 'path:NAME' or 'body:/json/pointer', not '" + bizId + "'");
    }
  }
  r.tool = node["tool"] ? node["tool"].as<std::string>() : r.name;
  r.upstreamTimeout =
      duration(node["upstream_timeout"], where + ": upstream_timeout", r.upstreamTimeout);
  r.upstreamKeepalive =
      duration(node["upstream_keepalive"], where + ": upstream_keepalive", r.upstreamKeepalive);
  if (node["upstream_keepalive_connections"]) {
    const auto n = node["upstream_keepalive_connections"].as<long long>();
    if (n <= 0 || n > 100'000) {
      refuse(where, "upstream_keepalive_connections must be between 1 and 100000");
    }
    r.upstreamKeepaliveConnections = static_cast<std::size_t>(n);
  }
  if (node["fingerprint"]) {
    if (r.mcpTools) refuse(where, "an MCP call's fingerprint is its tool and arguments");
    if (!node["fingerprint"].IsSequence() || node["fingerprint"].size() == 0) {
      refuse(where, "fingerprint lists method, route, target, body or body:/pointer");
    }
    r.fingerprint.clear();
    for (const auto& part : node["fingerprint"]) {
      const auto text = part.as<std::string>();
      if (text.rfind("body:", 0) == 0) {
        checkPointer(text.substr(5), where + ": fingerprint '" + text + "'");
      } else if (text != "method" && text != "route" && text != "target" && text != "body") {
        refuse(where, "fingerprint takes method, route, target, body or body:/pointer, not '" +
                          text + "'");
      }
      r.fingerprint.push_back(text);
    }
  }
  if (node["max_body"]) {
    const auto n = node["max_body"].as<long long>();
    if (n <= 0) refuse(where, "max_body must be a positive number of bytes");
    r.maxBody = static_cast<std::size_t>(n);
  }
  if (node["not_executed_statuses"]) {
    for (const auto& s : node["not_executed_statuses"]) {
      const int status = s.as<int>();
      if (status < 500 || status > 599) {
        refuse(where,
               "not_executed_statuses lists 5xx statuses only, not " + std::to_string(status));
      }
      r.notExecutedStatuses.insert(status);
    }
  }
  return r;
}

}  // namespace

std::optional<std::map<std::string, std::string>> Route::match(std::string_view target) const {
  const auto want = segments(path);
  const auto got = segments(target);
  if (want.size() != got.size()) return std::nullopt;
  std::map<std::string, std::string> parameters;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (isParameter(want[i])) {
      parameters.emplace(std::string(want[i].substr(1, want[i].size() - 2)), std::string(got[i]));
    } else if (want[i] != got[i]) {
      return std::nullopt;
    }
  }
  return parameters;
}

std::size_t ProxyConfig::largestBody() const {
  std::size_t largest = 0;
  for (const auto& r : routes) largest = std::max(largest, r.maxBody);
  return largest;
}

const Route* ProxyConfig::find(std::string_view method, std::string_view target,
                               std::map<std::string, std::string>& parameters) const {
  for (const auto& r : routes) {
    if (!r.methods.contains(std::string(method))) continue;
    if (auto p = r.match(target)) {
      parameters = std::move(*p);
      return &r;
    }
  }
  return nullptr;
}

ProxyConfig parseProxyConfig(const std::string& yamlText) {
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    refuse("configuration", std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap()) refuse("configuration", "the top level is a mapping");
  ProxyConfig c;
  try {
    onlyFields(
        root, "configuration",
        {"listen", "database", "idle_timeout", "request_timeout", "stop_grace", "max_connections",
         "caller_header", "agent_header", "trace_header", "web_config_file", "routes"});
    if (root["listen"]) {
      const auto listen = root["listen"].as<std::string>();
      const std::size_t colon = listen.rfind(':');
      if (colon == std::string::npos) refuse("listen", "'" + listen + "' is not host:port");
      c.listenAddress = listen.substr(0, colon);
      c.listenPort = listen.substr(colon + 1);
    }
    if (const auto db = root["database"]) {
      onlyFields(db, "database", {"dsn", "workers", "queue"});
      if (db["dsn"]) c.dsn = db["dsn"].as<std::string>();
      if (db["workers"]) c.databaseWorkers = db["workers"].as<int>();
      if (db["queue"]) c.databaseQueue = db["queue"].as<int>();
      if (c.databaseWorkers < 1 || c.databaseWorkers > 256)
        refuse("database.workers", "between 1 and 256");
      if (c.databaseQueue < 1) refuse("database.queue", "at least 1");
    }
    c.idleTimeout = duration(root["idle_timeout"], "idle_timeout", c.idleTimeout);
    c.requestTimeout = duration(root["request_timeout"], "request_timeout", c.requestTimeout);
    c.stopGrace = duration(root["stop_grace"], "stop_grace", c.stopGrace);
    if (root["max_connections"]) {
      c.maxConnections = root["max_connections"].as<int>();
      if (c.maxConnections < 1) refuse("max_connections", "at least 1");
    }
    for (auto [field, target] :
         {std::pair{"agent_header", &c.agentHeader}, std::pair{"trace_header", &c.traceHeader}}) {
      if (root[field]) {
        *target = root[field].as<std::string>();
        if (target->empty()) refuse(field, "names a request field, or is left out");
      }
    }
    if (root["web_config_file"]) c.webConfigFile = root["web_config_file"].as<std::string>();
    if (root["caller_header"]) {
      c.callerHeader = root["caller_header"].as<std::string>();
      if (c.callerHeader.empty()) refuse("caller_header", "names a request field, or is left out");
    }
    if (!root["routes"] || !root["routes"].IsSequence() || root["routes"].size() == 0) {
      refuse("routes", "at least one route is required");
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < root["routes"].size(); ++i) {
      Route r = parseRoute(root["routes"][i], i);
      if (!names.insert(r.name).second)
        refuse("route '" + r.name + "'", "a second route has this name");
      c.routes.push_back(std::move(r));
    }
  } catch (const YAML::Exception& e) {
    refuse("configuration", std::string("a field has the wrong type: ") + e.what());
  }
  return c;
}

ProxyConfig loadProxyConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the configuration file " + path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parseProxyConfig(text.str());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace idem::proxy

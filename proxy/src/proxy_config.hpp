// idemwatch-proxy's routes: which requests it claims before sending them upstream, read from a YAML
// file (see proxy/README.md for every field). A route names its upstream, the business type and
// object its requests act on, and the limits of one request.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idem::proxy {

struct Upstream {
  std::string host;
  std::string port;
  std::string basePath;  // prefixed to the request's target; no trailing '/'
  bool tls = false;      // https://: the server's certificate is checked against `ca` and `host`
  // The certificates (PEM) an https:// upstream's chain must lead to; empty: the system's.
  std::string caFile;
  // The TLS settings, made when the routes are read (a CA file that does not load is refused
  // then, not at the first request).
  std::shared_ptr<boost::asio::ssl::context> context;
};

// A tool of an MCP server whose `tools/call` requests are claimed. Its key is the call's
// params._meta["io.idemwatch/idempotencyKey"], else (when `keyFromArguments` names fields) the
// canonical JSON of those arguments.
struct McpTool {
  std::string name;  // the MCP tool's name, as tools/list gives it
  std::string bizType;
  std::string bizIdPointer;  // a JSON pointer into the call's arguments
  std::string tool;          // the record's tool; default: the MCP tool's name
  std::vector<std::string> keyFromArguments;
  std::optional<std::chrono::milliseconds> lease;  // default: the route's
};

struct Route {
  std::string name;
  std::string path;  // a pattern: literal segments and {parameter} segments
  std::set<std::string> methods;
  Upstream upstream;
  bool keyRequired = true;
  std::string bizType;
  // Where the business object's id is: a path parameter, or a JSON pointer into the body.
  std::optional<std::string> bizIdParameter;
  std::optional<std::string> bizIdPointer;
  std::string tool;
  std::chrono::milliseconds lease{30'000};
  // What makes two requests under one key the same request: "method", "route", "target" (path
  // and query), "body" (canonical JSON, keys sorted), or "body:/pointer" (one value of the body).
  // A client field that changes on every retry (a timestamp, a request id) stays out of it.
  std::vector<std::string> fingerprint{"method", "route", "target", "body"};
  std::chrono::milliseconds upstreamTimeout{10'000};
  // Upstream connections kept open after an answer and reused for the next request, while idle
  // for less than this (zero: a connection per request). It must be shorter than the upstream's
  // own idle timeout: a connection the upstream closes just as a request goes out on it leaves
  // that request's outcome unknown.
  std::chrono::milliseconds upstreamKeepalive{0};
  std::size_t upstreamKeepaliveConnections = 64;  // idle ones kept at most
  std::size_t maxBody = 1 << 20;
  // Upstream statuses that the upstream documents as "not executed" (a 503 refusal): the record
  // fails with a retry allowed. Every other 5xx is an unknown outcome.
  std::set<int> notExecutedStatuses;
  // Set: the route is a Streamable HTTP MCP endpoint. Its tools/call requests for these tools are
  // claimed; every other JSON-RPC message passes through unclaimed.
  std::optional<std::map<std::string, McpTool>> mcpTools;

  // The path parameters when `target` (path, no query) matches the pattern.
  std::optional<std::map<std::string, std::string>> match(std::string_view target) const;
};

struct ProxyConfig {
  std::string listenAddress = "127.0.0.1";
  std::string listenPort = "8480";
  std::string dsn;
  int databaseWorkers = 4;  // database sessions, opened when first needed
  int databaseQueue = 256;  // protocol calls running or waiting for a session before 503
  std::chrono::milliseconds idleTimeout{60'000};
  // From a request's first byte until it is read whole (and its answer written): a client that
  // sends slowly is cut off after it.
  std::chrono::milliseconds requestTimeout{30'000};
  // How long a stop waits for requests in flight before it reports what is left (UNKNOWN when
  // already sent upstream) and exits.
  std::chrono::milliseconds stopGrace{10'000};
  // Client connections open at once; one more is answered 503 and closed.
  int maxConnections = 16'384;
  // The request field naming the authenticated caller, set by the front door that authenticated
  // it (an API gateway, a TLS terminator checking client certificates). Set: every request must
  // carry it, and keys are the caller's own. Empty: one caller.
  std::string callerHeader;
  // The request field naming the agent that sent the request (attempts.agent_id), if any; and the
  // one carrying the trace (attempts.trace_id): a W3C traceparent's trace id, or any other
  // field's value whole.
  std::string agentHeader;
  std::string traceHeader = "traceparent";
  // The exporter toolkit's web config (TLS on this proxy's port, basic auth, response headers),
  // as idemwatch-exporter reads it; empty: plain HTTP, no login.
  std::string webConfigFile;
  std::vector<Route> routes;

  // The largest max_body of any route: the limit before a request's route is known.
  std::size_t largestBody() const;

  // The route whose pattern matches `target` and that accepts `method`; with its parameters.
  const Route* find(std::string_view method, std::string_view target,
                    std::map<std::string, std::string>& parameters) const;
};

// Reads and checks the YAML file; throws std::runtime_error naming the field at fault.
ProxyConfig loadProxyConfig(const std::string& path);
ProxyConfig parseProxyConfig(const std::string& yamlText);

}  // namespace idem::proxy

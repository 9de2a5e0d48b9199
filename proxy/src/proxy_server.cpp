#include "proxy_server.hpp"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <unordered_set>

#include "database_sessions.hpp"
#include "idem/database_error.hpp"
#include "idem/hex.hpp"
#include "idem/protocol_client.hpp"
#include "idem/vocabulary.hpp"
#include "idem/web/basic_auth.hpp"
#include "idem/web/tls_context.hpp"
#include "idem/web/web_config.hpp"
#include "idempotency_key.hpp"
#include "mcp.hpp"
#include "proxy_metrics.hpp"
#include "stored_response.hpp"

namespace idem::proxy {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using net::awaitable;
using net::use_awaitable;

constexpr std::size_t kHeaderLimit = std::size_t{16} * 1024;
constexpr std::size_t kUpstreamBodyLimit = std::size_t{8} * 1024 * 1024;
constexpr std::size_t kLingerLimit = std::size_t{1} << 20;
constexpr std::size_t kFirstRead = 1024;

void log(const std::string& line) {
  std::cerr << "idemwatch-proxy: " << line << '\n';
}

// A field of a protocol call's row, as the protocol's row readers take it.
FieldText fieldsOf(const Row& row) {
  return [&row](int i) -> const char* {
    const auto index = static_cast<std::size_t>(i);
    return index < row.size() && row[index] ? row[index]->c_str() : nullptr;
  };
}

std::string sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return hexEncode(digest.data(), length);
}

// Fields of one hop, not passed on. `Expect: 100-continue` is answered by the proxy itself: it
// has the whole body before it sends anything upstream.
bool hopByHop(std::string_view name) {
  static constexpr std::array<std::string_view, 10> kNames{"connection",
                                                           "keep-alive",
                                                           "proxy-authenticate",
                                                           "proxy-authorization",
                                                           "te",
                                                           "trailer",
                                                           "transfer-encoding",
                                                           "upgrade",
                                                           "content-length",
                                                           "expect"};
  for (auto n : kNames) {
    if (beast::iequals(n, name)) return true;
  }
  return false;
}

// What became of a request (proxy_metrics.hpp's results), carried from the handler to the session
// in this field, which the session counts and removes before the answer is written.
constexpr std::string_view kResultField = "Idemwatch-Result";

std::string_view resultOfProblem(std::string_view slug, http::status status) {
  static const std::map<std::string_view, std::string_view> kResults{
      {"request-in-progress", "in_progress"},
      {"payload_mismatch", "payload_mismatch"},
      {"business-object-taken", "refused"},
      {"key-retired", "refused"},
      {"failed", "refused"},
      {"completed-without-response", "refused"},
      {"invalid-idempotency-key", "invalid"},
      {"invalid-mcp-call", "invalid"},
      {"idempotency-key-missing", "invalid"},
      {"business-object-missing", "invalid"},
      {"invalid-trigger", "invalid"},
      {"refused-by-store", "invalid"},
      {"caller-missing", "invalid"},
      {"caller-invalid", "invalid"},
      {"upstream-unreachable", "not_sent"},
      {"claim-late", "late_claim"},
      {"database-unavailable", "database_unavailable"},
      {"body-too-large", "too_large"},
      {"header-too-large", "too_large"},
      {"too-many-connections", "overloaded"},
      {"unauthorized", "unauthorized"},
      {"no-route", "no_route"},
      {"upstream-failed", "passed_through"}};
  if (slug == "outcome-unknown") {
    return status == http::status::conflict ? "unknown_refused" : "unknown";
  }
  auto it = kResults.find(slug);
  return it == kResults.end() ? std::string_view{} : it->second;
}

// What the route's fingerprint names of the request, one part a line.
std::string fingerprintOf(const Route& route, const Request& req, const nlohmann::json& body,
                          const std::string& canonicalBody) {
  std::string text;
  for (const auto& part : route.fingerprint) {
    if (!text.empty()) text += '\n';
    if (part == "method") {
      text += req.method_string();
    } else if (part == "route") {
      text += route.name;
    } else if (part == "target") {
      text += req.target();
    } else if (part == "body") {
      text += canonicalBody;
    } else {
      const nlohmann::json::json_pointer pointer(part.substr(5));
      text +=
          part + "=" +
          (!body.is_discarded() && body.contains(pointer) ? body.at(pointer).dump() : "(absent)");
    }
  }
  return text;
}

// Printable ASCII; a space too when `space`.
bool printable(std::string_view text, bool space = false) {
  return std::all_of(text.begin(), text.end(), [space](unsigned char c) {
    return (c > 0x20 && c < 0x7f) || (space && c == 0x20);
  });
}

// The keys this proxy claimed lately, so that a repeat whose client names no trigger counts as
// http rather than initial. Only a hint for the retry figures: a restart or a second proxy
// forgets. Bounded: two generations of at most kRecentKeys hashes.
class RecentKeys {
 public:
  static constexpr std::size_t kRecentKeys = 1 << 16;
  bool seen(const std::string& key) const {
    const auto h = std::hash<std::string>{}(key);
    return current_.contains(h) || previous_.contains(h);
  }
  void remember(const std::string& key) {
    if (current_.size() >= kRecentKeys) {
      previous_ = std::move(current_);
      current_.clear();
    }
    current_.insert(std::hash<std::string>{}(key));
  }

 private:
  std::unordered_set<std::size_t> current_, previous_;
};

// Nothing is readable on an idle upstream connection: no close, reset or early bytes from the
// upstream. A TLS connection also has nothing decrypted and unread.
bool quiet(beast::tcp_stream& stream) {
  char byte = 0;
  const ssize_t n =
      ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT | MSG_NOSIGNAL);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}
bool quiet(beast::ssl_stream<beast::tcp_stream>& stream) {
  return SSL_pending(stream.native_handle()) == 0 && quiet(beast::get_lowest_layer(stream));
}

// Upstream connections kept open after an answer, for the next request to the same upstream
// (a route's upstream_keepalive). One is reused only before its idle time runs out and while
// nothing is readable on it: a request sent on a connection the upstream is closing has an
// unknown outcome, so reuse stays where the upstream is surely still listening. Most recently
// returned first. Only the io thread touches it.
template <typename Stream>
class UpstreamPool {
 public:
  std::unique_ptr<Stream> take(const std::string& upstream) {
    auto it = idle_.find(upstream);
    if (it == idle_.end()) return nullptr;
    auto& stack = it->second;
    const auto now = std::chrono::steady_clock::now();
    while (!stack.empty()) {
      Idle last = std::move(stack.back());
      stack.pop_back();
      if (now < last.until && quiet(*last.stream)) return std::move(last.stream);
    }
    return nullptr;
  }
  void give(const std::string& upstream, std::unique_ptr<Stream> stream,
            std::chrono::milliseconds keepalive, std::size_t most) {
    auto& stack = idle_[upstream];
    if (stack.size() >= most) stack.erase(stack.begin());
    stack.push_back({std::move(stream), std::chrono::steady_clock::now() + keepalive});
  }
  // Closes the connections whose idle time ran out (all of them with `all`).
  void sweep(bool all = false) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [upstream, stack] : idle_) {
      std::erase_if(stack, [&](const Idle& i) { return all || now >= i.until; });
    }
  }

 private:
  struct Idle {
    std::unique_ptr<Stream> stream;
    std::chrono::steady_clock::time_point until;
  };
  std::map<std::string, std::vector<Idle>> idle_;
};

Response problem(http::status status, std::string_view slug, std::string_view title,
                 const std::string& detail, unsigned version, bool keepAlive) {
  Response res{status, version};
  res.set(http::field::content_type, "application/problem+json");
  res.set(http::field::server, "idemwatch-proxy");
  nlohmann::json body{{"type", "urn:idemwatch:problem:" + std::string(slug)},
                      {"title", title},
                      {"status", static_cast<int>(status)},
                      {"detail", detail}};
  res.body() = body.dump();
  res.set(kResultField, resultOfProblem(slug, status));
  res.keep_alive(keepAlive);
  res.prepare_payload();
  return res;
}

// How the answers of a claimed request are shaped: problem+json for an HTTP route; for an MCP
// tool call, a JSON-RPC response under the call's id (a tool result with isError set, which the
// model reads, or a JSON-RPC error for a malformed call), as JSON or as an event stream.
struct Dialect {
  const McpToolCall* mcp = nullptr;
  bool stream = false;
};

Response mcpResponse(const Dialect& d, std::string_view member, const nlohmann::json& value,
                     unsigned version, bool keepAlive) {
  Response res{http::status::ok, version};
  res.set(http::field::content_type, d.stream ? "text/event-stream" : "application/json");
  res.set(http::field::server, "idemwatch-proxy");
  res.body() = encodeAnswer(d.mcp->id, member, value, d.stream);
  res.keep_alive(keepAlive);
  res.prepare_payload();
  return res;
}

Response refusal(const Dialect& d, http::status status, std::string_view slug,
                 std::string_view title, const std::string& detail, const Request& req) {
  if (d.mcp == nullptr) {
    return problem(status, slug, title, detail, req.version(), req.keep_alive());
  }
  const std::string result(resultOfProblem(slug, status));
  const std::string type = "urn:idemwatch:problem:" + std::string(slug);
  Response res;
  if (result == "invalid") {
    res = mcpResponse(d, "error",
                      {{"code", -32602},
                       {"message", std::string(title) + ": " + detail},
                       {"data", {{"type", type}}}},
                      req.version(), req.keep_alive());
  } else {
    res = mcpResponse(
        d, "result",
        {{"content", {{{"type", "text"}, {"text", std::string(title) + ": " + detail}}}},
         {"isError", true},
         {"_meta", {{"io.idemwatch/problem", type}}}},
        req.version(), req.keep_alive());
  }
  res.set(kResultField, result);
  return res;
}

struct UpstreamResult {
  enum class Kind { Answered, NotSent, Ambiguous } kind = Kind::NotSent;
  Response response;
  std::string reason;
  bool reusable = false;  // answered whole on a connection the upstream keeps open
};

}  // namespace

std::vector<std::string> routeNames(const ProxyConfig& config) {
  std::vector<std::string> names;
  for (const auto& r : config.routes) names.push_back(r.name);
  return names;
}

struct ProxyServer::State {
  State(ProxyConfig c, std::string path)
      : config(std::move(c)),
        configPath(std::move(path)),
        routes(std::make_shared<const ProxyConfig>(config)),
        metrics(routeNames(config)) {
    database =
        std::make_unique<DatabaseSessions>(ioc.get_executor(), config.dsn, config.databaseWorkers);
    if (config.webConfigFile.empty()) return;
    const WebConfig web = loadWebConfig(config.webConfigFile);
    for (const auto& warning : web.warnings) log(config.webConfigFile + ": " + warning);
    if (web.rateLimit.interval.count() > 0) {
      throw std::runtime_error(config.webConfigFile +
                               ": rate_limit is not applied by this proxy (a refused retry could "
                               "not be told from a refused request); remove it");
    }
    headers = web.headers;
    if (!web.basicAuthUsers.empty()) auth = std::make_unique<BasicAuth>(web.basicAuthUsers);
    if (web.tls) {
      tlsConfig = std::make_unique<TlsServerConfig>(*web.tls);
      tlsServer.emplace(net::ssl::context::tls_server);
      configureTlsContext(tlsServer->native_handle(), *tlsConfig);
    }
  }

  // The client certificate's subject (RFC 2253, spaces and anything outside printable ASCII
  // percent-escaped), when the web config verifies client certificates and this one passed;
  // else empty.
  std::string certificateSubject(SSL* ssl) const {
    if (!tlsConfig || (tlsConfig->clientAuth != ClientAuth::VerifyClientCertIfGiven &&
                       tlsConfig->clientAuth != ClientAuth::RequireAndVerifyClientCert)) {
      return {};
    }
    X509* peer = SSL_get1_peer_certificate(ssl);
    if (peer == nullptr) return {};
    std::string subject;
    if (SSL_get_verify_result(ssl) == X509_V_OK) {
      BIO* out = BIO_new(BIO_s_mem());
      X509_NAME_print_ex(out, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253);
      char* text = nullptr;
      const long n = BIO_get_mem_data(out, &text);
      for (long i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c > 0x20 && c < 0x7f && c != '%') {
          subject += static_cast<char>(c);
        } else {
          subject += "%" + hexEncode(&c, 1);
        }
      }
      BIO_free(out);
    }
    X509_free(peer);
    return subject;
  }

  // What a reload cannot change (where it listens, the database, its sessions) is read from
  // `config`; the routes from `routes`, which SIGHUP replaces. A request holds the routes it
  // started with until it ends.
  const ProxyConfig config;
  const std::string configPath;
  std::shared_ptr<const ProxyConfig> routes;
  std::unique_ptr<DatabaseSessions> database;  // made once `ioc` exists; its sessions use it
  ProxyMetrics metrics;
  int pending = 0;  // protocol calls waiting or running
  std::atomic<bool> stopping{false};
  int sessions = 0;
  std::map<std::string, tcp::resolver::results_type> resolved;  // by route
  UpstreamPool<beast::tcp_stream> plainUpstreams;
  UpstreamPool<beast::ssl_stream<beast::tcp_stream>> tlsUpstreams;
  // Connections waiting for their next request: a stop closes them at once.
  std::set<beast::tcp_stream*> idle;
  RecentKeys recent;  // only the io thread touches it
  // Claims whose upstream call is under way (only the io thread touches it).
  struct InFlight {
    Claim claim;
    bool sending;
  };
  std::set<InFlight*> inFlight;
  // The web config (--web.config.file): TLS on the proxy's own port, basic auth, headers.
  std::map<std::string, std::string> headers;
  std::unique_ptr<TlsServerConfig> tlsConfig;  // read by the TLS verify callback while serving
  std::optional<net::ssl::context> tlsServer;
  std::unique_ptr<BasicAuth> auth;
  net::thread_pool checks{1};  // bcrypt runs, off the I/O thread
  // Last, so destroyed first: coroutines still suspended in it when the server stops are
  // destroyed while the members their locals refer to (metrics, counters) still exist.
  net::io_context ioc{1};

  // Runs one protocol statement on a database session and answers its row. More than
  // `databaseQueue` calls waiting or running: DatabaseUnavailable at once, so a slow database
  // turns into 503s rather than a queue without end. The statement is a named object of the
  // caller's: GCC 12 destroys some temporaries of a co_await expression twice.
  awaitable<Row> onDatabase(const ProtocolStatement& statement,
                            std::chrono::steady_clock::time_point* sentAt = nullptr) {
    if (pending >= config.databaseQueue) {
      throw DatabaseUnavailable("too many protocol calls waiting for a database session");
    }
    metrics.setWaiting(++pending);
    struct Done {
      State* self;
      ~Done() {
        self->metrics.setWaiting(--self->pending);
        self->metrics.setPreparedStatements(self->database->prepared());
      }
    } done{this};
    try {
      co_return co_await database->query(statement, sentAt);
    } catch (const DatabaseError& e) {
      if (e.kind() != DatabaseErrorKind::ConnectionLost) throw;
      throw DatabaseUnavailable(e.what());
    }
  }

  // `sending`, when given, turns true once the first byte of the request is about to be written:
  // from then on the upstream may act on it.
  awaitable<UpstreamResult> callUpstream(const Route& route, const Request& req,
                                         bool* sending = nullptr) {
    const auto started = std::chrono::steady_clock::now();
    struct Timed {
      ProxyMetrics& metrics;
      const std::string& route;
      std::chrono::steady_clock::time_point started;
      ~Timed() {
        metrics.upstreamSeconds(
            route,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
    } timed{metrics, route.name, started};
    UpstreamResult out;
    const auto deadline = started + route.upstreamTimeout;
    const bool keepAlive = route.upstreamKeepalive.count() > 0;
    // Connections are kept per upstream as this route reads it (a reload may point the route
    // elsewhere or trust another CA).
    const std::string upstream = route.name + '\n' + route.upstream.host + ':' +
                                 route.upstream.port + '\n' + route.upstream.caFile;
    if (!route.upstream.tls) {
      auto stream = keepAlive ? plainUpstreams.take(upstream) : nullptr;
      const bool reused = stream != nullptr;
      if (!reused) stream = co_await connect(route, deadline, out);
      if (!stream) co_return out;
      metrics.upstreamConnection(route.name, reused);
      stream->expires_at(deadline);
      co_await exchange(*stream, route, req, out, sending, keepAlive);
      if (out.reusable) {
        plainUpstreams.give(upstream, std::move(stream), route.upstreamKeepalive,
                            route.upstreamKeepaliveConnections);
      }
      co_return out;
    }
    auto tls = keepAlive ? tlsUpstreams.take(upstream) : nullptr;
    const bool reused = tls != nullptr;
    if (!reused) {
      auto stream = co_await connect(route, deadline, out);
      if (!stream) co_return out;
      // TLS: the chain checked against the route's CA, the certificate's name against the host.
      // A handshake that fails has sent nothing of the request.
      tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(std::move(*stream),
                                                                   *route.upstream.context);
      if (SSL_set_tlsext_host_name(tls->native_handle(), route.upstream.host.c_str()) != 1) {
        out.reason = "cannot name " + route.upstream.host + " in the TLS handshake";
        co_return out;
      }
      tls->set_verify_callback(net::ssl::host_name_verification(route.upstream.host));
      beast::error_code ec;
      co_await tls->async_handshake(net::ssl::stream_base::client,
                                    net::redirect_error(use_awaitable, ec));
      if (ec) {
        out.reason = "the TLS handshake with " + route.upstream.host + ":" + route.upstream.port +
                     " failed: " + ec.message();
        co_return out;
      }
    }
    metrics.upstreamConnection(route.name, reused);
    beast::get_lowest_layer(*tls).expires_at(deadline);
    co_await exchange(*tls, route, req, out, sending, keepAlive);
    if (out.reusable) {
      tlsUpstreams.give(upstream, std::move(tls), route.upstreamKeepalive,
                        route.upstreamKeepaliveConnections);
    }
    co_return out;
  }

  // A new TCP connection to the route's upstream; null, with the reason in `out`, when none is
  // made before `deadline`.
  awaitable<std::unique_ptr<beast::tcp_stream>> connect(
      const Route& route, std::chrono::steady_clock::time_point deadline, UpstreamResult& out) {
    beast::error_code ec;
    // Resolved once and kept (a resolution is a trip to a helper thread); a renamed upstream
    // needs a restart. Only the io thread touches the cache.
    auto cached = resolved.find(route.name);
    if (cached == resolved.end()) {
      tcp::resolver resolver(co_await net::this_coro::executor);
      auto endpoints = co_await resolver.async_resolve(route.upstream.host, route.upstream.port,
                                                       net::redirect_error(use_awaitable, ec));
      if (ec) {
        out.reason = "cannot resolve " + route.upstream.host + ": " + ec.message();
        co_return nullptr;
      }
      cached = resolved.insert_or_assign(route.name, std::move(endpoints)).first;
    }
    const auto& endpoints = cached->second;
    auto stream = std::make_unique<beast::tcp_stream>(co_await net::this_coro::executor);
    stream->expires_at(deadline);
    co_await stream->async_connect(endpoints, net::redirect_error(use_awaitable, ec));
    // Header and body: no Nagle wait.
    if (!ec) stream->socket().set_option(tcp::no_delay(true), ec);
    if (ec) {
      out.reason = "cannot connect to " + route.upstream.host + ":" + route.upstream.port + ": " +
                   ec.message();
      co_return nullptr;
    }
    co_return stream;
  }

  // Sends the request on a connected stream and reads the whole answer into `out`.
  template <typename Stream>
  static awaitable<void> exchange(Stream& stream, const Route& route, const Request& req,
                                  UpstreamResult& out, bool* sending, bool keepAlive) {
    beast::error_code ec;
    Request up{req.method(), route.upstream.basePath + std::string(req.target()), 11};
    for (const auto& field : req) {
      if (!hopByHop(field.name_string()) && !beast::iequals(field.name_string(), "host")) {
        up.insert(field.name_string(), field.value());
      }
    }
    const bool defaultPort = route.upstream.port == (route.upstream.tls ? "443" : "80");
    up.set(http::field::host,
           defaultPort ? route.upstream.host : route.upstream.host + ":" + route.upstream.port);
    up.keep_alive(keepAlive);
    up.body() = req.body();
    up.prepare_payload();
    if (sending != nullptr) *sending = true;
    const std::size_t written =
        co_await http::async_write(stream, up, net::redirect_error(use_awaitable, ec));
    if (ec) {
      out.kind = written == 0 ? UpstreamResult::Kind::NotSent : UpstreamResult::Kind::Ambiguous;
      out.reason = "sending to the upstream failed after " + std::to_string(written) +
                   " bytes: " + ec.message();
      co_return;
    }
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    // Interim answers (102 Processing, 103 Early Hints) come before the final one: skipped.
    do {
      parser.emplace();
      parser->body_limit(kUpstreamBodyLimit);
      co_await http::async_read(stream, buffer, *parser, net::redirect_error(use_awaitable, ec));
    } while (!ec && parser->get().result_int() / 100 == 1 &&
             parser->get().result() != http::status::switching_protocols);
    if (ec) {
      out.kind = UpstreamResult::Kind::Ambiguous;
      out.reason = ec == beast::error::timeout
                       ? "the upstream sent no complete answer within " +
                             std::to_string(route.upstreamTimeout.count()) + " ms"
                       : "the upstream's answer was cut off: " + ec.message();
      co_return;
    }
    out.kind = UpstreamResult::Kind::Answered;
    // Bytes beyond the answer (an upstream that sent more than it was asked for) leave the
    // connection in a state no next request should inherit.
    out.reusable = keepAlive && parser->keep_alive() && buffer.size() == 0;
    out.response = parser->release();
    if (!out.reusable) {
      beast::error_code ignored;
      beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
  }

  // The upstream's answer as the client gets it: hop-by-hop fields dropped, our length.
  static Response relay(const Response& upstream, unsigned version, bool keepAlive,
                        std::string_view result = "sent") {
    Response res{upstream.result(), version};
    for (const auto& field : upstream) {
      if (!hopByHop(field.name_string()) && !beast::iequals(field.name_string(), kResultField)) {
        res.insert(field.name_string(), field.value());
      }
    }
    res.set(kResultField, result);
    res.body() = upstream.body();
    res.keep_alive(keepAlive);
    res.prepare_payload();
    return res;
  }

  awaitable<Response> passThrough(const Route& route, const Request& req) {
    const auto result = co_await callUpstream(route, req);
    if (result.kind == UpstreamResult::Kind::Answered) {
      co_return relay(result.response, req.version(), req.keep_alive(), "passed_through");
    }
    co_return problem(http::status::bad_gateway, "upstream-failed", "The upstream did not answer",
                      result.reason, req.version(), req.keep_alive());
  }

  awaitable<Response> replay(const BeginResult& begun, const Request& req, const Dialect& d) {
    const bool keepAlive = req.keep_alive();
    const std::string& payload = begun.responsePayload.value_or("{}");
    // What the record keeps: the upstream's answer as stored_response.hpp encodes it or, for an
    // MCP tool call, {"result": ...} or {"error": ...}. A final failure keeps it as the text of
    // {"error": <what fail() recorded>}, or a person's or the evidence's reason.
    std::string kept = payload;
    if (begun.status != RecordStatus::Success) {
      const auto doc = nlohmann::json::parse(payload, nullptr, false);
      if (!doc.is_object() || !doc.contains("error") || !doc["error"].is_string()) {
        kept.clear();
      } else {
        kept = doc["error"].get<std::string>();
      }
    }
    if (d.mcp != nullptr) {
      auto doc = nlohmann::json::parse(kept, nullptr, false);
      if (doc.is_object() && doc.contains("result") && doc["result"].is_object()) {
        auto result = doc["result"];
        result["_meta"]["io.idemwatch/replayed"] = true;
        auto res = mcpResponse(d, "result", result, req.version(), keepAlive);
        res.set("Idempotent-Replayed", "true");
        res.set(kResultField, "replayed");
        co_return res;
      }
      if (doc.is_object() && doc.contains("error")) {
        auto res = mcpResponse(d, "error", doc["error"], req.version(), keepAlive);
        res.set("Idempotent-Replayed", "true");
        res.set(kResultField, "replayed");
        co_return res;
      }
    }
    std::optional<Response> stored = decodeStoredResponse(kept, req.version());
    if (!stored && begun.status != RecordStatus::Success && !kept.empty()) {
      co_return refusal(d, http::status::conflict, "failed", "The request failed finally",
                        "this key's request failed and may not run again: " + kept, req);
    }
    if (!stored) {
      co_return refusal(d, http::status::conflict, "completed-without-response",
                        "The request completed; its answer was not recorded",
                        "this key's request is settled as " +
                            std::string(format(begun.status.value_or(RecordStatus::Success))) +
                            " by evidence or a person, without the upstream's answer",
                        req);
    }
    stored->set("Idempotent-Replayed", "true");
    stored->set(kResultField, "replayed");
    stored->keep_alive(keepAlive);
    stored->prepare_payload();
    co_return std::move(*stored);
  }

  // What the claimant reports; a report that cannot be written leaves the record PROCESSING,
  // which its lease turns UNKNOWN: never a second call upstream.
  awaitable<void> report(const char* what, const ProtocolStatement& call, const std::string& key) {
    try {
      const Row row = co_await onDatabase(call);
      const ChangeResult result = readChangeRow(fieldsOf(row));
      if (!result.ok()) {
        log(std::string(what) + " of key '" + key +
            "' refused: " + std::string(format(result.result)));
      }
    } catch (const std::exception& e) {
      log(std::string(what) + " of key '" + key +
          "' not written (its lease will turn it UNKNOWN): " + e.what());
    }
  }

  // What an upstream's answer makes of the claim: the record's outcome and what it keeps.
  struct Verdict {
    enum class Kind { Complete, FailFinal, FailRetry, Unknown } kind;
    std::string stored;  // complete's payload, fail's error
    std::string reason;  // for Unknown: why
  };

  static Verdict judge(const Route& route, const Response& answer, const Dialect& d) {
    const int status = static_cast<int>(answer.result_int());
    if (status >= 500) {
      if (route.notExecutedStatuses.contains(status)) {
        return {Verdict::Kind::FailRetry, encodeStoredResponse(answer), {}};
      }
      return {Verdict::Kind::Unknown,
              {},
              "the upstream answered " + std::to_string(status) +
                  ", which does not say whether it acted"};
    }
    if (status >= 400) return {Verdict::Kind::FailFinal, encodeStoredResponse(answer), {}};
    if (d.mcp == nullptr) return {Verdict::Kind::Complete, encodeStoredResponse(answer), {}};
    // An MCP tool call: the JSON-RPC answer decides. A tool result is the tool's own word
    // (isError: it ran and refused, final); a JSON-RPC error that says the call was malformed
    // or named no tool is final; any other error, or no readable answer, may hide an effect.
    const auto type = answer.find(http::field::content_type);
    const auto message = findAnswer(type == answer.end() ? std::string_view{} : type->value(),
                                    answer.body(), d.mcp->id);
    if (!message) {
      return {Verdict::Kind::Unknown,
              {},
              "the MCP server answered " + std::to_string(status) +
                  " without a JSON-RPC answer to the call"};
    }
    if (message->contains("result") && (*message)["result"].is_object()) {
      const auto& result = (*message)["result"];
      const nlohmann::json kept{{"result", result}};
      const bool failed = result.value("isError", false) == true;
      return {failed ? Verdict::Kind::FailFinal : Verdict::Kind::Complete, kept.dump(), {}};
    }
    const auto& error = message->value("error", nlohmann::json::object());
    const int code = error.is_object() ? error.value("code", 0) : 0;
    if (code == -32700 || code == -32600 || code == -32601 || code == -32602) {
      return {Verdict::Kind::FailFinal, nlohmann::json{{"error", error}}.dump(), {}};
    }
    return {Verdict::Kind::Unknown,
            {},
            "the MCP server answered the call with JSON-RPC error " + std::to_string(code) +
                ", which does not say whether the tool acted"};
  }

  awaitable<Response> claimed(const Route& route, const Request& req, const std::string& key,
                              const BeginResult& begun, const Dialect& d) {
    const Claim claim{key, begun.version.value_or(0), begun.claimToken.value_or("")};
    // Known to a stop until the upstream has answered or given up: a stop that cannot wait for
    // it reports it at once (stopInFlight).
    InFlight flight{claim, false};
    inFlight.insert(&flight);
    const auto result = co_await callUpstream(route, req, &flight.sending);
    inFlight.erase(&flight);
    using Kind = UpstreamResult::Kind;
    if (result.kind == Kind::NotSent) {
      const ProtocolStatement call =
          failStatement(claim, "not sent upstream: " + result.reason, true);
      co_await report("fail", call, key);
      co_return refusal(d, http::status::bad_gateway, "upstream-unreachable",
                        "The upstream could not be reached",
                        result.reason + "; nothing was sent, so the same key may be retried", req);
    }
    const Verdict verdict = result.kind == Kind::Ambiguous
                                ? Verdict{Verdict::Kind::Unknown, {}, result.reason}
                                : judge(route, result.response, d);
    switch (verdict.kind) {
      case Verdict::Kind::Unknown: {
        const ProtocolStatement call = markUnknownStatement(claim, verdict.reason);
        co_await report("mark_unknown", call, key);
        co_return refusal(d,
                          result.kind == Kind::Ambiguous ? http::status::gateway_timeout
                                                         : http::status::bad_gateway,
                          "outcome-unknown", "The outcome is unknown",
                          verdict.reason +
                              "; the request may have been carried out. It will not be sent "
                              "again: evidence or a person decides, and a retry of this key is "
                              "refused",
                          req);
      }
      case Verdict::Kind::FailFinal:
      case Verdict::Kind::FailRetry: {
        const bool retry = verdict.kind == Verdict::Kind::FailRetry;
        const ProtocolStatement call = failStatement(claim, verdict.stored, retry);
        co_await report("fail", call, key);
        break;
      }
      case Verdict::Kind::Complete: {
        const ProtocolStatement call = completeStatement(claim, verdict.stored);
        co_await report("complete", call, key);
        break;
      }
    }
    co_return relay(result.response, req.version(), req.keep_alive());
  }

  // What every claimed request shares: its scope (the route's `scope` and the caller, prefixed to
  // `begin.key`), why it was sent, its agent and its trace. The caller is the one caller_header
  // names, else the one this proxy authenticated (`authenticated`: a basic-auth user, a client
  // certificate's subject). An answer when the request cannot be claimed.
  std::optional<Response> describe(const ProxyConfig& current, const Request& req, const Dialect& d,
                                   const std::string& scope, const std::string& authenticated,
                                   BeginRequest& begin) {
    std::string prefix = scope;
    if (current.callerHeader.empty() && !authenticated.empty()) {
      prefix += authenticated + " ";
    } else if (!current.callerHeader.empty()) {
      const auto caller = req.find(current.callerHeader);
      if (caller == req.end() || caller->value().empty()) {
        return refusal(d, http::status::unauthorized, "caller-missing", "No caller",
                       "this proxy scopes keys to the caller named in " + current.callerHeader +
                           ", which the request lacks",
                       req);
      }
      const std::string_view name = caller->value();
      if (!printable(name)) {
        return refusal(
            d, http::status::bad_request, "caller-invalid", "Invalid caller",
            current.callerHeader + " holds a space or a character outside printable ASCII", req);
      }
      prefix += std::string(name) + " ";
    }
    begin.key = prefix + begin.key;
    if (auto trigger = req.find("Idempotency-Trigger"); trigger != req.end()) {
      const auto named = tryParse<TriggerSource>(trigger->value());
      if (!named) {
        return refusal(d, http::status::bad_request, "invalid-trigger",
                       "Invalid Idempotency-Trigger",
                       "Idempotency-Trigger is one of " + spellings<TriggerSource>() + ", not '" +
                           std::string(trigger->value()) + "'",
                       req);
      }
      begin.source = *named;
    } else {
      // Unnamed: the first request of a key is initial, a repeat this proxy saw is http.
      begin.source = recent.seen(begin.key) ? TriggerSource::Http : TriggerSource::Initial;
    }
    if (!current.agentHeader.empty()) {
      if (auto agent = req.find(current.agentHeader);
          agent != req.end() && !agent->value().empty()) {
        begin.agentId = std::string(agent->value().substr(0, 255));
      }
    }
    if (auto trace = req.find(current.traceHeader); trace != req.end()) {
      const std::string_view value = trace->value();
      if (beast::iequals(current.traceHeader, "traceparent")) {
        // version-traceid-parentid-flags: the trace id is what the console searches by.
        const auto first = value.find('-');
        if (first != std::string_view::npos && value.size() >= first + 33) {
          begin.traceId = std::string(value.substr(first + 1, 32));
        }
      } else if (!value.empty()) {
        begin.traceId = std::string(value.substr(0, 255));
      }
    }
    return std::nullopt;
  }

  // A claim acknowledged only after its lease ran out (its commit waited for a synchronous
  // standby, the database stalled): meanwhile the record looked abandoned, and a person may have
  // settled it on an upstream that showed nothing. It is not sent upstream; the claim is given
  // back by its own token (FAILED, retry allowed), and the caller may retry with the same key,
  // which the record then answers.
  awaitable<Response> givenBack(const BeginRequest& begin, const BeginResult& begun,
                                std::chrono::steady_clock::duration took, const Request& req,
                                const Dialect& d) {
    const auto ms = [](auto duration) {
      return std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
    };
    const std::string why = "the idempotency store acknowledged the claim " + ms(took) +
                            " ms after it was sent, past its lease of " + ms(begin.lease) +
                            " ms; nothing was sent upstream";
    const Claim claim{begin.key, begun.version.value_or(0), begun.claimToken.value_or("")};
    const ProtocolStatement call = failStatement(claim, why, true);
    co_await report("give-back", call, claim.key);
    log("key '" + begin.key + "': " + why);
    auto res = refusal(d, http::status::service_unavailable, "claim-late",
                       "The claim came back after its lease ran out",
                       why + "; retry with the same key", req);
    res.set(http::field::retry_after, "1");
    co_return res;
  }

  // Claims `begin` and answers by its outcome: an executed claim goes upstream once.
  awaitable<Response> claim(const Route& route, const Request& req, const BeginRequest& begin,
                            const Dialect& d) {
    BeginResult begun;
    std::chrono::steady_clock::time_point sent;
    try {
      const ProtocolStatement call = beginStatement(begin);
      const Row row = co_await onDatabase(call, &sent);
      begun = readBeginRow(fieldsOf(row));
    } catch (const DatabaseUnavailable& e) {
      co_return refusal(
          d, http::status::service_unavailable, "database-unavailable",
          "The idempotency store is unavailable",
          std::string(e.what()) + "; nothing was claimed or sent upstream, retry later", req);
    } catch (const DatabaseError& e) {
      co_return refusal(d, http::status::bad_request, "refused-by-store", "The request was refused",
                        e.what(), req);
    }
    recent.remember(begin.key);
    const auto took = std::chrono::steady_clock::now() - sent;
    switch (begun.outcome) {
      case Outcome::Executed:
        if (took >= begin.lease) co_return co_await givenBack(begin, begun, took, req, d);
        co_return co_await claimed(route, req, begin.key, begun, d);
      case Outcome::Replayed:
        co_return co_await replay(begun, req, d);
      case Outcome::InProgress:
        if (begun.status == RecordStatus::Unknown) {
          co_return refusal(d, http::status::conflict, "outcome-unknown", "The outcome is unknown",
                            "this key's request may have been carried out; it will not be sent "
                            "again until evidence or a person decides",
                            req);
        } else {
          const auto seconds = std::max<long long>(
              1, std::chrono::duration_cast<std::chrono::seconds>(begin.lease).count());
          auto res = refusal(d, http::status::conflict, "request-in-progress",
                             "A request with this key is in progress",
                             "wait for it to finish (at most " + std::to_string(seconds) +
                                 " s), then retry with the same key",
                             req);
          res.set(http::field::retry_after, std::to_string(seconds));
          co_return res;
        }
      case Outcome::PayloadMismatch:
        co_return refusal(d, http::status::unprocessable_entity, "payload_mismatch",
                          "The key was used for another request",
                          "this idempotency key was first sent with a different request; use a "
                          "new key for a new request",
                          req);
      case Outcome::Rejected:
        co_return refusal(d, http::status::conflict, "business-object-taken",
                          "The business object is taken",
                          "business object '" + begin.bizId +
                              "' succeeded, is in flight, or its side effect is recorded under "
                              "another key",
                          req);
      case Outcome::Retired:
        co_return refusal(d, http::status::conflict, "key-retired", "The key was used",
                          "this key was used and its record removed by retention; it does not run "
                          "again",
                          req);
    }
    co_return refusal(d, http::status::internal_server_error, "internal", "Unexpected outcome",
                      "the store answered an outcome this proxy does not know", req);
  }

  awaitable<Response> handle(const ProxyConfig& current, const Route& route,
                             const std::map<std::string, std::string>& params,
                             const std::string& caller, const Request& req) {
    if (route.mcpTools) co_return co_await handleMcp(current, route, caller, req);
    const Dialect plain;
    std::vector<std::string_view> keyFields;
    for (auto [it, end] = req.equal_range("Idempotency-Key"); it != end; ++it) {
      keyFields.push_back(it->value());
    }
    const auto parsed = parseIdempotencyKey(keyFields);
    if (const auto* error = std::get_if<KeyError>(&parsed)) {
      co_return refusal(plain, http::status::bad_request, "invalid-idempotency-key",
                        "Invalid Idempotency-Key", error->reason, req);
    }
    if (std::holds_alternative<std::monostate>(parsed)) {
      if (route.keyRequired) {
        co_return refusal(plain, http::status::bad_request, "idempotency-key-missing",
                          "Idempotency-Key is required",
                          "route '" + route.name +
                              "' changes state: send an Idempotency-Key "
                              "header, the same on every retry of this request",
                          req);
      }
      co_return co_await passThrough(route, req);
    }

    const auto body = nlohmann::json::parse(req.body(), nullptr, false);
    BeginRequest begin;
    begin.key = std::get<std::string>(parsed);
    if (route.bizIdParameter) {
      begin.bizId = params.at(*route.bizIdParameter);
    } else {
      const nlohmann::json::json_pointer pointer(*route.bizIdPointer);
      if (body.is_discarded() || !body.contains(pointer) ||
          !(body.at(pointer).is_string() || body.at(pointer).is_number_integer())) {
        co_return refusal(plain, http::status::bad_request, "business-object-missing",
                          "The business object is missing",
                          "route '" + route.name + "' reads the business object's id at " +
                              *route.bizIdPointer + " in a JSON body; this request has none there",
                          req);
      }
      const auto& id = body.at(pointer);
      begin.bizId = id.is_string() ? id.get<std::string>() : id.dump();
    }
    // Keys are scoped to the caller, the method and the route: two callers' keys never meet.
    const std::string scope = std::string(req.method_string()) + " " + route.name + " ";
    if (auto refused = describe(current, req, plain, scope, caller, begin))
      co_return std::move(*refused);
    begin.bizType = route.bizType;
    begin.tool = route.tool;
    const std::string canonicalBody = body.is_discarded() ? req.body() : body.dump();
    begin.requestHash = sha256Hex(fingerprintOf(route, req, body, canonicalBody));
    begin.requestPayload =
        body.is_object() ? canonicalBody : nlohmann::json{{"body", canonicalBody}}.dump();
    begin.lease = route.lease;
    co_return co_await claim(route, req, begin, plain);
  }

  // A Streamable HTTP MCP route: a tools/call of a configured tool is claimed by its key;
  // everything else passes through.
  awaitable<Response> handleMcp(const ProxyConfig& current, const Route& route,
                                const std::string& caller, const Request& req) {
    if (req.method() == http::verb::get) {
      // The server's own event stream (notifications, requests to the client): not relayed. MCP
      // clients take 405 as "this server offers none".
      Response res{http::status::method_not_allowed, req.version()};
      res.set(http::field::allow, "POST, DELETE");
      res.set(kResultField, "passed_through");
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_return res;
    }
    const auto message = nlohmann::json::parse(req.body(), nullptr, false);
    const auto& tools = *route.mcpTools;
    for (const auto& name : toolsCalledInBatch(message)) {
      if (tools.contains(name)) {
        co_return problem(http::status::bad_request, "invalid-mcp-call",
                          "A claimed tool in a batch",
                          "tool '" + name +
                              "' is called in a JSON-RPC batch; send each call of a "
                              "claimed tool as a request of its own",
                          req.version(), req.keep_alive());
      }
    }
    const auto call = parseToolCall(message);
    if (!call || !tools.contains(call->tool)) co_return co_await passThrough(route, req);
    const McpTool& tool = tools.at(call->tool);
    const auto accept = req.find(http::field::accept);
    const Dialect mcp{&*call, accept != req.end() && wantsStreamOnly(accept->value())};

    BeginRequest begin;
    if (call->key) {
      if (!call->key->is_string() || call->key->get<std::string>().empty() ||
          call->key->get<std::string>().size() > 200 ||
          !printable(call->key->get<std::string>(), true)) {
        co_return refusal(mcp, http::status::bad_request, "invalid-idempotency-key",
                          "Invalid idempotency key",
                          "params._meta[\"" + std::string(kMcpKeyField) +
                              "\"] is a string of 1 to 200 printable ASCII characters",
                          req);
      }
      begin.key = call->key->get<std::string>();
    } else if (!tool.keyFromArguments.empty()) {
      nlohmann::json fields = nlohmann::json::object();
      for (const auto& name : tool.keyFromArguments) {
        if (!call->arguments.is_object() || !call->arguments.contains(name)) {
          co_return refusal(mcp, http::status::bad_request, "idempotency-key-missing",
                            "The idempotency key is missing",
                            "tool '" + tool.name + "' derives its key from argument '" + name +
                                "', which the call lacks",
                            req);
        }
        fields[name] = call->arguments[name];
      }
      begin.key = "arguments " + fields.dump();
    } else if (route.keyRequired) {
      co_return refusal(mcp, http::status::bad_request, "idempotency-key-missing",
                        "The idempotency key is missing",
                        "tool '" + tool.name + "' changes state: put a key in params._meta[\"" +
                            std::string(kMcpKeyField) + "\"], the same on every retry of this call",
                        req);
    } else {
      co_return co_await passThrough(route, req);
    }
    const nlohmann::json::json_pointer pointer(tool.bizIdPointer);
    if (!call->arguments.is_object() || !call->arguments.contains(pointer) ||
        !(call->arguments.at(pointer).is_string() ||
          call->arguments.at(pointer).is_number_integer())) {
      co_return refusal(mcp, http::status::bad_request, "business-object-missing",
                        "The business object is missing",
                        "tool '" + tool.name + "' reads the business object's id at " +
                            tool.bizIdPointer + " in its arguments; this call has none there",
                        req);
    }
    const auto& id = call->arguments.at(pointer);
    begin.bizId = id.is_string() ? id.get<std::string>() : id.dump();
    const std::string scope = "tools/call " + route.name + " ";
    if (auto refused = describe(current, req, mcp, scope, caller, begin))
      co_return std::move(*refused);
    begin.bizType = tool.bizType;
    begin.tool = tool.tool;
    // The JSON-RPC id changes on every retry: the fingerprint is the tool and its arguments.
    const std::string arguments = call->arguments.dump();
    begin.requestHash =
        sha256Hex("tools/call\n" + route.name + "\n" + tool.name + "\n" + arguments);
    begin.requestPayload =
        nlohmann::json{{"tool", tool.name}, {"arguments", call->arguments}}.dump();
    begin.lease = tool.lease.value_or(route.lease);
    co_return co_await claim(route, req, begin, mcp);
  }

  // After answering a request whose body was refused unread: stop sending, then read and drop what
  // the client still sends, for up to a second, so that closing does not reset the connection
  // before the client has read the answer (a reset discards what it had not read yet).
  static awaitable<void> linger(beast::tcp_stream& stream) {
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.expires_after(std::chrono::seconds(1));
    std::array<char, 16384> drop{};
    std::size_t dropped = 0;
    while (!ec && dropped < kLingerLimit) {
      dropped += co_await stream.async_read_some(net::buffer(drop),
                                                 net::redirect_error(use_awaitable, ec));
    }
  }

  awaitable<void> session(tcp::socket socket) {
    ++sessions;
    metrics.connectionOpened();
    struct Leave {
      State* self;
      ~Leave() {
        --self->sessions;
        self->metrics.connectionClosed();
      }
    } leave{this};
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    if (!tlsServer) {
      beast::tcp_stream stream(std::move(socket));
      co_await serve(stream, std::string());
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *tlsServer);
    beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
    tcp.expires_after(config.requestTimeout);
    idle.insert(&tcp);
    co_await stream.async_handshake(net::ssl::stream_base::server,
                                    net::redirect_error(use_awaitable, ec));
    idle.erase(&tcp);
    if (ec) co_return;
    co_await serve(stream, certificateSubject(stream.native_handle()));
    tcp.expires_after(std::chrono::milliseconds(500));
    co_await stream.async_shutdown(net::redirect_error(use_awaitable, ec));
    tcp.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  // The requests of one connection, plain or TLS. `subject`: the client certificate's subject
  // when TLS verified one, the caller of its requests unless caller_header names another.
  template <typename Stream>
  awaitable<void> serve(Stream& stream, const std::string& subject) {
    constexpr bool kPlain = std::is_same_v<Stream, beast::tcp_stream>;
    beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
    beast::error_code ec;
    beast::flat_buffer buffer;
    while (!stopping) {
      // Waiting for a request: an idle connection holds no buffer beyond its first bytes, and
      // waits at most idle_timeout. From its first byte, a request has request_timeout to arrive
      // whole: a client sending a byte at a time (slowloris) is cut off then.
      if (buffer.size() == 0) {
        buffer.shrink_to_fit();
        tcp.expires_after(config.idleTimeout);
        idle.insert(&tcp);
        const std::size_t n = co_await stream.async_read_some(
            buffer.prepare(kFirstRead), net::redirect_error(use_awaitable, ec));
        idle.erase(&tcp);
        if (ec) break;
        buffer.commit(n);
      }
      http::request_parser<http::string_body> parser;
      parser.header_limit(kHeaderLimit);
      const std::shared_ptr<const ProxyConfig> current = routes;
      parser.body_limit(current->largestBody());
      tcp.expires_after(config.requestTimeout);
      co_await http::async_read_header(stream, buffer, parser,
                                       net::redirect_error(use_awaitable, ec));
      if (ec == http::error::header_limit) {
        auto res = problem(http::status::request_header_fields_too_large, "header-too-large",
                           "The request's header is too large",
                           "this proxy reads at most " + std::to_string(kHeaderLimit / 1024) +
                               " KiB of request line and fields",
                           11, false);
        metrics.request({}, res[kResultField]);
        res.erase(kResultField);
        co_await http::async_write(stream, res, net::redirect_error(use_awaitable, ec));
        if constexpr (kPlain) {
          if (!ec) co_await linger(stream);
        }
        break;
      }
      if (ec) break;
      const auto& header = parser.get();
      const std::string_view target = header.target();
      const std::string_view path = target.substr(0, target.find('?'));
      std::map<std::string, std::string> params;
      const Route* route = current->find(header.method_string(), path, params);
      // The header was read under the largest route's limit: a declared length is checked
      // against this route's now, a chunked body as it arrives.
      if (route != nullptr) {
        parser.body_limit(route->maxBody);
        if (parser.content_length() && *parser.content_length() > route->maxBody) {
          ec = http::error::body_limit;
        }
      }
      // A client that asks before sending its body is told to go on (a body over the route's
      // limit is refused instead, unread).
      if (!ec && !parser.is_done() && header.version() == 11 &&
          beast::iequals(header[http::field::expect], "100-continue")) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        co_await net::async_write(stream, net::buffer(kContinue.data(), kContinue.size()),
                                  net::redirect_error(use_awaitable, ec));
        if (ec) break;
      }
      if (!ec) {
        co_await http::async_read(stream, buffer, parser, net::redirect_error(use_awaitable, ec));
      }
      Response res;
      bool close = false;
      bool answered = false;  // refused before the request's route or /metrics is reached
      const bool unread = ec == http::error::body_limit;  // the client may still be sending it
      if (ec == http::error::body_limit) {
        res =
            problem(http::status::payload_too_large, "body-too-large", "The body is too large",
                    "route '" + (route ? route->name : std::string("?")) + "' takes at most " +
                        std::to_string(route ? route->maxBody : current->largestBody()) + " bytes",
                    header.version(), false);
        close = true;
        answered = true;
      } else if (ec) {
        break;
      }
      // Basic auth (--web.config.file): the login is the proxy's, so its Authorization field is
      // taken off before the request goes upstream; the user is the request's caller.
      std::string caller = subject;
      if (!answered && auth) {
        const auto field = parser.get().find(http::field::authorization);
        const std::string value = field == parser.get().end() ? "" : std::string(field->value());
        bool allowed = false;
        if (!value.empty()) allowed = co_await authorised(value);
        if (allowed) {
          caller = basicCredentials(value)->first;
          parser.get().erase(http::field::authorization);
        } else {
          res = problem(http::status::unauthorized, "unauthorized", "Unauthorized",
                        "this proxy takes requests with the basic-auth login of a user its web "
                        "config names",
                        header.version(), header.keep_alive());
          res.set(http::field::www_authenticate, "Basic realm=\"idemwatch-proxy\"");
          answered = true;
        }
      }
      if (answered) {
        // too large, or not authorised: `res` says so
      } else if (route == nullptr && header.method() == http::verb::get && path == "/metrics") {
        res = Response{http::status::ok, header.version()};
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res.body() = metrics.scrape();
        res.keep_alive(header.keep_alive());
        res.prepare_payload();
      } else if (route == nullptr) {
        res = problem(http::status::not_found, "no-route", "No route",
                      "no route of this proxy takes " + std::string(header.method_string()) + " " +
                          std::string(path),
                      header.version(), header.keep_alive());
      } else {
        tcp.expires_never();
        try {
          res = co_await handle(*current, *route, params, caller, parser.get());
        } catch (const std::exception& e) {
          log(std::string("request failed: ") + e.what());
          res = problem(http::status::internal_server_error, "internal", "Internal error", e.what(),
                        header.version(), false);
        }
      }
      if (auto result = res.find(kResultField); result != res.end()) {
        metrics.request(route ? route->name : std::string(), result->value());
        res.erase(result);
      }
      for (const auto& [name, value] : headers) res.set(name, value);
      close = close || !res.keep_alive() || stopping;
      res.keep_alive(!close);
      tcp.expires_after(config.requestTimeout);
      co_await http::async_write(stream, res, net::redirect_error(use_awaitable, ec));
      if constexpr (kPlain) {
        if (!ec && unread) co_await linger(stream);
      }
      if (ec || close) break;
    }
  }

  // A login checked before is answered at once; a new one costs a bcrypt run, on the checks'
  // thread, never on the I/O thread.
  awaitable<bool> authorised(const std::string& header) {
    if (const auto known = auth->remembered(header)) co_return *known;
    const bool checked = co_await net::co_spawn(checks, bcryptCheck(header), use_awaitable);
    co_return checked;
  }

  awaitable<bool> bcryptCheck(std::string header) { co_return auth->allows(header); }

  // The grace period is over and claims are still waiting on the upstream: each is reported now,
  // on a session of its own, rather than left PROCESSING until its lease runs out. A request
  // whose first byte went out may have acted: UNKNOWN. One not yet sent: FAILED, retry allowed.
  void stopInFlight() {
    if (inFlight.empty()) return;
    try {
      pqxx::connection session(config.dsn);
      ProtocolClient client(session);
      for (const InFlight* f : inFlight) {
        const ChangeResult result =
            f->sending
                ? client.markUnknown(f->claim.key, f->claim.version,
                                     "the proxy stopped before the upstream answered",
                                     f->claim.token)
                : client.fail(f->claim.key, f->claim.version,
                              "the proxy stopped before sending it upstream", f->claim.token, true);
        log(std::string(f->sending ? "stopped while the upstream had "
                                   : "stopped before sending ") +
            "key '" + f->claim.key + "': " + std::string(format(result.result)));
      }
    } catch (const std::exception& e) {
      log(std::string("stopping: the claims in flight could not be reported (their leases will "
                      "turn them UNKNOWN): ") +
          e.what());
    }
  }

  // SIGHUP: the file read again. Its routes (and caller_header) replace the running ones; a file
  // that does not parse changes nothing. Requests in flight finish on the routes they began with.
  void reload() {
    if (configPath.empty()) return;
    ProxyConfig next;
    try {
      next = loadProxyConfig(configPath);
    } catch (const std::exception& e) {
      log(std::string("reload refused, the routes stay as they were: ") + e.what());
      return;
    }
    if (next.listenAddress != config.listenAddress || next.listenPort != config.listenPort ||
        (!next.dsn.empty() && next.dsn != config.dsn) ||
        next.databaseWorkers != config.databaseWorkers ||
        next.databaseQueue != config.databaseQueue || next.idleTimeout != config.idleTimeout ||
        next.requestTimeout != config.requestTimeout ||
        next.maxConnections != config.maxConnections || next.stopGrace != config.stopGrace) {
      log("reload: listen, database, idle_timeout, request_timeout, max_connections and "
          "stop_grace changes take effect at the next start");
    }
    for (const auto& r : next.routes) metrics.addRoute(r.name);
    resolved.clear();
    plainUpstreams.sweep(true);
    tlsUpstreams.sweep(true);
    routes = std::make_shared<const ProxyConfig>(std::move(next));
    log("reloaded " + configPath + ": " + std::to_string(routes->routes.size()) + " route(s)");
  }

  awaitable<void> accept(tcp::acceptor& acceptor) {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(net::redirect_error(use_awaitable, ec));
      if (ec) {
        if (!acceptor.is_open()) co_return;
        // Out of descriptors (or memory): the connection waits in the backlog; try again soon
        // rather than spin.
        log("accepting a connection failed: " + ec.message());
        net::steady_timer pause(ioc, std::chrono::milliseconds(100));
        co_await pause.async_wait(net::redirect_error(use_awaitable, ec));
        continue;
      }
      if (sessions >= config.maxConnections) {
        net::co_spawn(ioc, turnAway(std::move(socket)), net::detached);
      } else {
        net::co_spawn(ioc, session(std::move(socket)), net::detached);
      }
    }
  }

  // A connection beyond max_connections: one short 503, then closed, without reading.
  awaitable<void> turnAway(tcp::socket socket) {
    static const std::string kAnswer = [] {
      auto res =
          problem(http::status::service_unavailable, "too-many-connections", "Too many connections",
                  "this proxy holds its max_connections open; retry later", 11, false);
      res.erase(kResultField);
      res.set(http::field::retry_after, "1");
      std::ostringstream out;
      out << res;
      return out.str();
    }();
    metrics.request({}, "overloaded");
    beast::tcp_stream stream(std::move(socket));
    stream.expires_after(std::chrono::seconds(1));
    beast::error_code ec;
    co_await net::async_write(stream, net::buffer(kAnswer), net::redirect_error(use_awaitable, ec));
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }
};

ProxyServer::ProxyServer(ProxyConfig config, std::string configPath)
    : state_(std::make_unique<State>(std::move(config), std::move(configPath))) {}

ProxyServer::~ProxyServer() {
  state_->database->close();
}

int ProxyServer::run() {
  State& s = *state_;
  // Every connection is a descriptor: the soft limit (often 1,024) is raised to the hard one, and
  // a max_connections beyond it is said at once rather than found under load.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    const auto needed = static_cast<rlim_t>(s.config.maxConnections) +
                        static_cast<rlim_t>(s.config.databaseWorkers) + 64;
    if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < needed) {
      log("max_connections " + std::to_string(s.config.maxConnections) + " needs about " +
          std::to_string(needed) + " descriptors; this process may open " +
          std::to_string(files.rlim_cur) + " (raise LimitNOFILE or ulimit -n)");
    }
  }
  tcp::acceptor acceptor(s.ioc);
  try {
    tcp::resolver resolver(s.ioc);
    const auto endpoint = *resolver.resolve(s.config.listenAddress, s.config.listenPort).begin();
    acceptor.open(endpoint.endpoint().protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
  } catch (const std::exception& e) {
    log("cannot listen on " + s.config.listenAddress + ":" + s.config.listenPort + ": " + e.what());
    return 1;
  }
  log("listening on " + s.config.listenAddress + ":" +
      std::to_string(acceptor.local_endpoint().port()) + ", " +
      std::to_string(s.routes->routes.size()) + " route(s)");
  net::co_spawn(s.ioc, s.accept(acceptor), net::detached);
  // Idle upstream connections whose keep-alive ran out are closed within a second.
  net::steady_timer sweeper(s.ioc);
  std::function<void()> sweep = [&] {
    sweeper.expires_after(std::chrono::seconds(1));
    sweeper.async_wait([&](const beast::error_code& ec) {
      if (ec || s.stopping) return;
      s.plainUpstreams.sweep();
      s.tlsUpstreams.sweep();
      sweep();
    });
  };
  sweep();
  net::signal_set hangup(s.ioc, SIGHUP);
  std::function<void()> onHangup = [&] {
    hangup.async_wait([&](const beast::error_code& ec, int) {
      if (ec) return;
      s.reload();
      onHangup();
    });
  };
  onHangup();
  net::signal_set signals(s.ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const beast::error_code& ec, int) {
    if (ec) return;
    log("stopping: no new connections; requests in flight finish");
    s.stopping = true;
    acceptor.close();
    sweeper.cancel();
    s.plainUpstreams.sweep(true);
    s.tlsUpstreams.sweep(true);
    for (auto* stream : s.idle) stream->cancel();
    net::co_spawn(
        s.ioc,
        [&s]() -> awaitable<void> {
          const auto deadline = std::chrono::steady_clock::now() + s.config.stopGrace;
          net::steady_timer tick(co_await net::this_coro::executor);
          while (s.sessions > 0 && std::chrono::steady_clock::now() < deadline) {
            tick.expires_after(std::chrono::milliseconds(100));
            co_await tick.async_wait(use_awaitable);
          }
          if (s.sessions > 0) {
            log(std::to_string(s.sessions) +
                " connection(s) still open after the grace period: closed");
            s.stopInFlight();
          }
          s.ioc.stop();
        },
        net::detached);
  });
  s.ioc.run();
  return 0;
}

}  // namespace idem::proxy

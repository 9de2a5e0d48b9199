#include "web_server.hpp"

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "exporter_options.hpp"
#include "idem/web/basic_auth.hpp"
#include "idem/web/tls_context.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// The toolkit's rate_limit, as a token bucket of `burst` tokens, one more every `interval`, per
// client: what one client spends, another still has.
class RateLimiter {
 public:
  explicit RateLimiter(const RateLimit& limit) : limit_(limit) {}
  bool allow(const std::string& client) {
    if (limit_.interval.count() <= 0) return true;
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    if (buckets_.size() >= kClients && !buckets_.contains(client)) {
      // Bounded: the full buckets are of clients quiet long enough to have refilled.
      std::erase_if(buckets_,
                    [&](const auto& b) { return refilled(b.second, now) >= limit_.burst; });
      if (buckets_.size() >= kClients) return false;
    }
    auto [it, fresh] = buckets_.try_emplace(client, Bucket{static_cast<double>(limit_.burst), now});
    Bucket& b = it->second;
    b.tokens = refilled(b, now);
    b.last = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  static constexpr std::size_t kClients = 4096;
  double refilled(const Bucket& b, Clock::time_point now) const {
    const std::chrono::duration<double> elapsed = now - b.last;
    const std::chrono::duration<double> interval = limit_.interval;
    return std::min<double>(limit_.burst, b.tokens + elapsed / interval);
  }
  RateLimit limit_;
  std::mutex mutex_;
  std::map<std::string, Bucket> buckets_;
};

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

Response plain(unsigned status, std::string body, const std::string& contentType) {
  Response r{static_cast<http::status>(status), 11};
  r.set(http::field::content_type, contentType);
  r.body() = std::move(body);
  return r;
}

std::string landingPage(const std::string& telemetryPath, const std::string& status) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>idemwatch "
         "exporter</title></head>\n"
         "<body><h1>idemwatch exporter</h1>\n"
         "<p>Idempotency figures of the idem schema for Prometheus.</p>\n"
         "<p><a href=\"" +
         telemetryPath + "\">Metrics</a></p>\n" +
         (status.empty() ? std::string() : "<p>" + status + "</p>\n") + "<p>" + versionText() +
         "</p>\n</body></html>\n";
}

// The request target's path, percent-decoded, without its query; nullopt when the encoding is
// broken or decodes to a NUL.
std::optional<std::string> pathOf(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  std::string out;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '%') {
      out += target[i];
      continue;
    }
    if (i + 2 >= target.size() || !std::isxdigit(static_cast<unsigned char>(target[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(target[i + 2]))) {
      return std::nullopt;
    }
    const char c = static_cast<char>(std::stoi(std::string(target.substr(i + 1, 2)), nullptr, 16));
    if (c == '\0') return std::nullopt;
    out += c;
    i += 2;
  }
  return out;
}

tcp::endpoint endpointOf(const std::string& listenAddress) {
  const ListenAddress a = parseListenAddress(listenAddress);
  const auto port = static_cast<unsigned short>(a.port);
  if (a.host.empty()) return {tcp::v4(), port};
  boost::system::error_code ec;
  const auto address = net::ip::make_address(a.host, ec);
  if (ec) throw WebServerError("cannot serve on " + listenAddress + ": " + ec.message());
  return {address, port};
}

}  // namespace

class WebServer::Door {
 public:
  Door(const WebServerSettings& settings, std::shared_ptr<prometheus::Collectable> metrics);
  ~Door();

  std::vector<int> ports() const { return ports_; }
  bool tls() const { return ssl_.has_value(); }
  DoorCounts counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }

 private:
  net::awaitable<void> accept(tcp::acceptor& acceptor);
  net::awaitable<void> serve(tcp::socket socket, net::ip::address client);
  template <typename Stream>
  net::awaitable<void> exchange(Stream& stream, beast::tcp_stream& tcp,
                                const net::ip::address& client);
  net::awaitable<Response> answer(const Request& request, const net::ip::address& client);
  net::awaitable<bool> authorised(const std::string& header);
  net::awaitable<bool> bcryptCheck(std::string header);
  std::string metricsText() const;
  bool admit(const net::ip::address& client);
  void release(const net::ip::address& client);
  template <typename Field>
  void count(Field field) {
    std::lock_guard lock(mutex_);
    ++(counts_.*field);
  }

  const WebServerSettings settings_;
  const DoorLimits limits_;
  std::shared_ptr<prometheus::Collectable> metrics_;
  std::unique_ptr<TlsServerConfig> tlsConfig_;  // read by the TLS verify callback while serving
  std::optional<net::ssl::context> ssl_;
  std::unique_ptr<BasicAuth> auth_;
  std::optional<RateLimiter> rateLimiter_;
  std::string landingPage_;

  // Before the io_context: destroying it destroys the connections still open, whose last act is
  // to release their client's count.
  mutable std::mutex mutex_;
  std::map<net::ip::address, int> perClient_;
  DoorCounts counts_;

  net::thread_pool checks_{2};  // bcrypt runs, off the I/O threads
  net::io_context io_;
  std::vector<tcp::acceptor> acceptors_;
  std::vector<int> ports_;
  std::vector<std::thread> threads_;
};

WebServer::Door::Door(const WebServerSettings& settings,
                      std::shared_ptr<prometheus::Collectable> metrics)
    : settings_(settings),
      limits_(settings.limits),
      metrics_(std::move(metrics)),
      landingPage_(landingPage(settings.telemetryPath, {})) {
  const WebConfig& config = settings.webConfig;
  if (!config.basicAuthUsers.empty()) auth_ = std::make_unique<BasicAuth>(config.basicAuthUsers);
  if (config.rateLimit.interval.count() > 0) rateLimiter_.emplace(config.rateLimit);
  if (config.tls) {
    tlsConfig_ = std::make_unique<TlsServerConfig>(*config.tls);
    ssl_.emplace(net::ssl::context::tls_server);
    try {
      configureTlsContext(ssl_->native_handle(), *tlsConfig_);
    } catch (const std::exception& e) {
      throw WebServerError("cannot serve on " + settings.listenAddress + " with TLS: " + e.what());
    }
  }
  try {
    const tcp::endpoint endpoint = endpointOf(settings.listenAddress);
    tcp::acceptor& acceptor = acceptors_.emplace_back(io_);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(net::socket_base::max_listen_connections);
    ports_.push_back(acceptor.local_endpoint().port());
  } catch (const boost::system::system_error& e) {
    throw WebServerError("cannot serve on " + settings.listenAddress + (ssl_ ? " with TLS" : "") +
                         ": " + e.code().message());
  }
  for (tcp::acceptor& a : acceptors_) net::co_spawn(io_, accept(a), net::detached);
  for (int i = 0; i < std::max(1, limits_.ioThreads); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
}

WebServer::Door::~Door() {
  io_.stop();
  for (std::thread& t : threads_) t.join();
  checks_.join();
}

bool WebServer::Door::admit(const net::ip::address& client) {
  std::lock_guard lock(mutex_);
  if (counts_.open >= limits_.maxConnections) {
    ++counts_.refusedTotalLimit;
    return false;
  }
  int& mine = perClient_[client];
  if (mine >= limits_.maxPerClient) {
    ++counts_.refusedClientLimit;
    return false;
  }
  ++mine;
  ++counts_.open;
  return true;
}

void WebServer::Door::release(const net::ip::address& client) {
  std::lock_guard lock(mutex_);
  --counts_.open;
  const auto it = perClient_.find(client);
  if (it != perClient_.end() && --it->second <= 0) perClient_.erase(it);
}

net::awaitable<void> WebServer::Door::accept(tcp::acceptor& acceptor) {
  for (;;) {
    boost::system::error_code ec;
    // Each connection on a strand of its own: the I/O threads share the io_context, and a
    // stream's timer, its TLS engine and its reads must never run on two threads at once.
    tcp::socket socket = co_await acceptor.async_accept(
        net::make_strand(io_), net::redirect_error(net::use_awaitable, ec));
    if (ec == net::error::operation_aborted) co_return;
    if (ec) continue;  // a connection reset before it was taken, out of descriptors: go on
    boost::system::error_code peerError;
    const tcp::endpoint peer = socket.remote_endpoint(peerError);
    if (peerError) continue;
    const net::ip::address client = peer.address();
    if (!admit(client)) {
      // Refused as it is accepted: closed at once, with a reset, holding nothing.
      socket.set_option(net::socket_base::linger(true, 0), peerError);
      socket.close(peerError);
      continue;
    }
    const auto strand = socket.get_executor();
    net::co_spawn(strand, serve(std::move(socket), client), net::detached);
  }
}

net::awaitable<void> WebServer::Door::serve(tcp::socket socket, net::ip::address client) {
  struct Release {
    Door* door;
    net::ip::address client;
    ~Release() { door->release(client); }
  } release{this, client};
  try {
    socket.set_option(tcp::no_delay(true));
    if (ssl_) {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *ssl_);
      beast::tcp_stream& tcp = stream.next_layer();
      tcp.expires_after(limits_.handshakeTimeout);
      boost::system::error_code ec;
      co_await stream.async_handshake(net::ssl::stream_base::server,
                                      net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        count(ec == beast::error::timeout ? &DoorCounts::handshakeTimeouts
                                          : &DoorCounts::handshakeFailures);
        co_return;
      }
      co_await exchange(stream, tcp, client);
      tcp.expires_after(std::chrono::milliseconds(500));
      co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
    } else {
      beast::tcp_stream stream(std::move(socket));
      co_await exchange(stream, stream, client);
      boost::system::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  } catch (const std::exception& e) {
    logDebug(std::string("web: a connection ended: ") + e.what());
  }
}

template <typename Stream>
net::awaitable<void> WebServer::Door::exchange(Stream& stream, beast::tcp_stream& tcp,
                                               const net::ip::address& client) {
  beast::flat_buffer buffer(limits_.maxHeadBytes + 1024);
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits_.maxHeadBytes));
  parser.body_limit(limits_.maxHeadBytes);
  tcp.expires_after(limits_.headTimeout);
  boost::system::error_code ec;
  co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
  Response response;
  if (ec == beast::error::timeout) {
    count(&DoorCounts::headTimeouts);
    co_return;  // dropped: the head never came whole
  }
  if (ec == http::error::header_limit) {
    response = plain(431, "Request Header Fields Too Large\n", "text/plain; charset=utf-8");
  } else if (ec == http::error::body_limit) {
    response = plain(413, "Payload Too Large\n", "text/plain; charset=utf-8");
  } else if (ec == http::error::end_of_stream || ec == net::error::eof ||
             ec == net::error::connection_reset) {
    co_return;
  } else if (ec) {
    response = plain(400, "Bad Request\n", "text/plain; charset=utf-8");
  } else {
    response = co_await answer(parser.get(), client);
  }
  for (const auto& [name, value] : settings_.webConfig.headers) response.set(name, value);
  response.set(http::field::connection, "close");
  const bool head = !ec && parser.get().method() == http::verb::head;
  response.prepare_payload();
  if (head) {
    http::response_serializer<http::string_body> serializer(response);
    tcp.expires_after(limits_.writeTimeout);
    co_await http::async_write_header(stream, serializer,
                                      net::redirect_error(net::use_awaitable, ec));
    co_return;
  }
  tcp.expires_after(limits_.writeTimeout);
  co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
}

net::awaitable<bool> WebServer::Door::authorised(const std::string& header) {
  // A login this door has checked before is answered here at once; only a new one costs a
  // bcrypt run, on the checks' own threads, so a remembered scrape never waits behind it.
  const std::optional<bool> known = auth_->remembered(header);
  if (known) co_return *known;
  // A member coroutine taking the header by value, not a capturing lambda: GCC 12 destroys a
  // coroutine lambda's captures twice.
  const bool checked = co_await net::co_spawn(checks_, bcryptCheck(header), net::use_awaitable);
  co_return checked;
}

net::awaitable<bool> WebServer::Door::bcryptCheck(std::string header) {
  co_return auth_->allows(header);
}

net::awaitable<Response> WebServer::Door::answer(const Request& request,
                                                 const net::ip::address& client) {
  std::string rateKey = "address " + client.to_string();
  if (auth_ && auth_->enabled()) {
    const auto header = request.find(http::field::authorization);
    const std::string value = header == request.end() ? "" : std::string(header->value());
    // Awaited in a statement of its own: GCC 12 destroys the temporaries of a co_await inside a
    // short-circuit condition twice.
    bool allowed = false;
    if (!value.empty()) allowed = co_await authorised(value);
    if (!allowed) {
      count(&DoorCounts::unauthorized);
      Response r = plain(401, "Unauthorized\n", "text/plain; charset=utf-8");
      r.set(http::field::www_authenticate, "Basic realm=\"idemwatch-exporter\"");
      co_return r;
    }
    rateKey = "user " + basicCredentials(value)->first;
  }
  if (rateLimiter_ && !rateLimiter_->allow(rateKey)) {
    count(&DoorCounts::rateLimited);
    co_return plain(429, "Too Many Requests\n", "text/plain; charset=utf-8");
  }
  const auto target = request.target();
  const std::optional<std::string> path = pathOf(std::string_view(target.data(), target.size()));
  if (!path) co_return plain(400, "Bad Request\n", "text/plain; charset=utf-8");
  const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
  if (*path == settings_.telemetryPath) {
    if (!get) {
      Response r = plain(405, "Method Not Allowed\n", "text/plain; charset=utf-8");
      r.set(http::field::allow, "GET, HEAD");
      co_return r;
    }
    co_return plain(200, metricsText(), "text/plain; version=0.0.4; charset=utf-8");
  }
  if (*path == "/" && get) {
    std::string page = landingPage_;
    if (settings_.landingStatus)
      page = landingPage(settings_.telemetryPath, settings_.landingStatus());
    co_return plain(200, std::move(page), "text/html; charset=utf-8");
  }
  co_return plain(404, "Not Found\n", "text/plain; charset=utf-8");
}

std::string WebServer::Door::metricsText() const {
  std::vector<prometheus::MetricFamily> families = metrics_->Collect();
  const DoorCounts c = counts();
  auto refused = makeFamily("idempotency_exporter_http_connections_refused_total",
                            "Connections refused as they were accepted, by the limit they met: "
                            "per client address or in all.",
                            prometheus::MetricType::Counter);
  addSample(refused, {{"limit", "client"}}, static_cast<double>(c.refusedClientLimit));
  addSample(refused, {{"limit", "total"}}, static_cast<double>(c.refusedTotalLimit));
  auto dropped = makeFamily("idempotency_exporter_http_connections_dropped_total",
                            "Connections dropped unanswered: the TLS handshake or the request head "
                            "did not come in time, or the TLS handshake failed.",
                            prometheus::MetricType::Counter);
  addSample(dropped, {{"reason", "handshake_timeout"}}, static_cast<double>(c.handshakeTimeouts));
  addSample(dropped, {{"reason", "handshake_failed"}}, static_cast<double>(c.handshakeFailures));
  addSample(dropped, {{"reason", "head_timeout"}}, static_cast<double>(c.headTimeouts));
  auto refusedRequests = makeFamily("idempotency_exporter_http_requests_refused_total",
                                    "Requests answered 401 (no or a wrong login) or 429 (the "
                                    "client's rate limit).",
                                    prometheus::MetricType::Counter);
  addSample(refusedRequests, {{"code", "401"}}, static_cast<double>(c.unauthorized));
  addSample(refusedRequests, {{"code", "429"}}, static_cast<double>(c.rateLimited));
  auto open =
      makeFamily("idempotency_exporter_http_connections_open",
                 "Connections open now, this scrape's included.", prometheus::MetricType::Gauge);
  addSample(open, {}, static_cast<double>(c.open));
  for (auto* f : {&refused, &dropped, &refusedRequests, &open}) families.push_back(std::move(*f));
  return prometheus::TextSerializer().Serialize(families);
}

WebServer::WebServer(const WebServerSettings& settings,
                     std::shared_ptr<prometheus::Collectable> metrics)
    : door_(std::make_unique<Door>(settings, std::move(metrics))) {}

WebServer::~WebServer() = default;

std::vector<int> WebServer::ports() const {
  return door_->ports();
}

bool WebServer::tls() const {
  return door_->tls();
}

DoorCounts WebServer::counts() const {
  return door_->counts();
}

}  // namespace idem::exporter

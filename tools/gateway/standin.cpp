// idemwatch-gateway-standin: what a payment gateway's status endpoint answers, for the tests and
// the demo of `idemctl reconcile --lookup`. It knows what happened from a truth file (JSON lines a
// simulator or a test writes, re-read when it changes):
//
//   {"key": "pay-1", "status": "succeeded", "amount_minor": 2990, "currency": "CNY", "id": "ch_1"}
//
// and answers GET /v1/payments/{key} with 200 {"id", "status", "amount", "currency"} (the amount in
// minor units), or 404 {"error": "not_found"} for a key it never saw; POST /v1/payments/query with
// the key in the body ({"key": ...} as JSON, or key=... as a form) answers the same. Fault switches
// make it answer late, fail, throttle, lie about an amount, or refuse a request without the bearer
// token it was given (never logged). One thread per connection; each request is logged to stderr on
// one line. It runs until killed.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "idem/command_line.hpp"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Json = nlohmann::json;

struct Options {
  std::string listen = "127.0.0.1:0";
  std::optional<std::string> truth;
  std::optional<std::string> tlsCert;
  std::optional<std::string> tlsKey;
  int delayMs = 0;
  double failRate = 0;
  int ratePerSecond = 0;  // 0: no limit
  std::set<std::string> lieAmount;
  std::optional<std::string> requireAuth;  // the file holding the bearer token every request needs
};

std::mutex logMutex;

void log(const std::string& line) {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const std::lock_guard lock(logMutex);
  std::cerr << when << " " << line << "\n" << std::flush;
}

// The truth file, read again whenever its size or modification time changes.
class Truth {
 public:
  explicit Truth(std::optional<std::string> path) : path_(std::move(path)) {}

  std::optional<Json> find(const std::string& key) {
    const std::lock_guard lock(mutex_);
    refresh();
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void refresh() {
    if (!path_) return;
    std::error_code ec;
    const auto size = std::filesystem::file_size(*path_, ec);
    if (ec) {
      entries_.clear();
      seen_.reset();
      return;
    }
    const auto time = std::filesystem::last_write_time(*path_, ec);
    const std::pair<std::uintmax_t, std::filesystem::file_time_type> stamp{size, time};
    if (seen_ && *seen_ == stamp) return;
    seen_ = stamp;
    entries_.clear();
    std::ifstream in(*path_);
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const Json entry = Json::parse(line, nullptr, false);
      if (entry.is_discarded() || !entry.is_object() || !entry.contains("key") ||
          !entry["key"].is_string()) {
        log("truth " + *path_ + ":" + std::to_string(number) + ": not a JSON object with a key");
        continue;
      }
      entries_[entry["key"].get<std::string>()] = entry;  // a later line of a key wins
    }
    log("truth " + *path_ + ": " + std::to_string(entries_.size()) + " key(s)");
  }

  std::optional<std::string> path_;
  std::mutex mutex_;
  std::optional<std::pair<std::uintmax_t, std::filesystem::file_time_type>> seen_;
  std::map<std::string, Json> entries_;
};

// At most N answers a second (a fixed one-second window); beyond it, 429 with Retry-After: 1.
class Throttle {
 public:
  explicit Throttle(int perSecond) : perSecond_(perSecond) {}
  bool allow() {
    if (perSecond_ <= 0) return true;
    const std::lock_guard lock(mutex_);
    const auto second = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (second != window_) {
      window_ = second;
      used_ = 0;
    }
    return used_++ < perSecond_;
  }

 private:
  int perSecond_;
  std::mutex mutex_;
  long long window_ = -1;
  int used_ = 0;
};

struct Server {
  Options options;
  Truth truth;
  Throttle throttle;
  std::mutex randomMutex;
  std::mt19937_64 random{std::random_device{}()};
  std::optional<std::string> bearer;

  explicit Server(Options o)
      : options(std::move(o)), truth(options.truth), throttle(options.ratePerSecond) {
    if (options.requireAuth) {
      std::ifstream in(*options.requireAuth);
      std::string token;
      if (!std::getline(in, token) || token.empty()) {
        throw std::runtime_error("cannot read a token from " + *options.requireAuth);
      }
      bearer = token;
    }
  }

  bool failsNow() {
    if (options.failRate <= 0) return false;
    const std::lock_guard lock(randomMutex);
    return std::uniform_real_distribution<double>(0, 1)(random) < options.failRate;
  }
};

std::string urlDecoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const std::string hex(text.substr(i + 1, 2));
      char* end = nullptr;
      const long value = std::strtol(hex.c_str(), &end, 16);
      if (end == hex.c_str() + 2) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

http::response<http::string_body> answer(Server& server,
                                         const http::request<http::string_body>& request) {
  http::response<http::string_body> response;
  response.version(request.version());
  response.set(http::field::server, "idemwatch-gateway-standin");
  response.set(http::field::content_type, "application/json");
  auto reply = [&](http::status status, const Json& body) {
    response.result(status);
    response.body() = body.dump();
    response.prepare_payload();
    return response;
  };
  if (server.options.delayMs > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(server.options.delayMs));
  }
  constexpr std::string_view kPrefix = "/v1/payments/";
  constexpr std::string_view kQuery = "/v1/payments/query";
  const std::string targetText(request.target());
  const std::string_view target = targetText;
  const bool post = request.method() == http::verb::post;
  if (!post && request.method() != http::verb::get) {
    return reply(http::status::method_not_allowed, {{"error", "method_not_allowed"}});
  }
  if (post != (target == kQuery) || target.substr(0, kPrefix.size()) != kPrefix ||
      target.size() == kPrefix.size()) {
    return reply(http::status::not_found, {{"error", "no_such_endpoint"}});
  }
  if (server.bearer && request[http::field::authorization] != "Bearer " + *server.bearer) {
    return reply(http::status::unauthorized, {{"error", "unauthorized"}});
  }
  if (!server.throttle.allow()) {
    response.set(http::field::retry_after, "1");
    return reply(http::status::too_many_requests, {{"error", "rate_limited"}});
  }
  if (server.failsNow()) return reply(http::status::internal_server_error, {{"error", "internal"}});
  std::string key;
  if (post) {
    const std::string type(request[http::field::content_type]);
    if (type == "application/json") {
      const Json body = Json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
      if (!body.is_object() || !body.contains("key") || !body["key"].is_string())
        return reply(http::status::bad_request, {{"error", "no_key_in_body"}});
      key = body["key"].get<std::string>();
    } else if (type == "application/x-www-form-urlencoded") {
      const std::string_view form = request.body();
      if (form.substr(0, 4) != "key=")
        return reply(http::status::bad_request, {{"error", "no_key_in_body"}});
      key = urlDecoded(form.substr(4, form.find('&') == std::string_view::npos
                                          ? std::string_view::npos
                                          : form.find('&') - 4));
    } else {
      return reply(http::status::unsupported_media_type, {{"error", "unsupported_media_type"}});
    }
  } else {
    std::string_view rest = target.substr(kPrefix.size());
    rest = rest.substr(0, rest.find('?'));
    key = urlDecoded(rest);
  }
  const std::optional<Json> entry = server.truth.find(key);
  if (!entry) return reply(http::status::not_found, {{"error", "not_found"}});
  Json body{{"id", entry->value("id", "pi_" + key)}, {"status", entry->value("status", "")}};
  if (entry->contains("amount_minor")) {
    std::int64_t amount = (*entry)["amount_minor"].get<std::int64_t>();
    if (server.options.lieAmount.contains(key)) amount += 100;
    body["amount"] = amount;
  }
  if (entry->contains("currency")) body["currency"] = (*entry)["currency"];
  return reply(http::status::ok, body);
}

template <typename Stream>
void exchange(Server& server, Stream& stream, const std::string& peer) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> request;
    beast::error_code ec;
    http::read(stream, buffer, request, ec);
    if (ec) return;  // closed, or not HTTP
    http::response<http::string_body> response = answer(server, request);
    response.keep_alive(request.keep_alive());
    log(peer + " " + std::string(request.method_string()) + " " + std::string(request.target()) +
        " -> " + std::to_string(response.result_int()));
    http::write(stream, response, ec);
    if (ec || !response.keep_alive()) return;
  }
}

void serve(Server& server, net::ssl::context* tls, tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  const std::string peer =
      ec ? std::string("?") : remote.address().to_string() + ":" + std::to_string(remote.port());
  try {
    if (tls == nullptr) {
      exchange(server, socket, peer);
      socket.shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
    beast::ssl_stream<tcp::socket> stream(std::move(socket), *tls);
    stream.handshake(net::ssl::stream_base::server, ec);
    if (ec) {
      log(peer + " TLS handshake failed: " + ec.message());
      return;
    }
    exchange(server, stream, peer);
    stream.shutdown(ec);
  } catch (const std::exception& e) {
    log(peer + " connection ended: " + std::string(e.what()));
  }
}

int run(int argc, char** argv) {
  Options options;
  std::string rate;
  idem::CommandLine cli(
      "idemwatch-gateway-standin", "idemwatch-gateway-standin --truth FILE [flags]",
      "A payment gateway's status endpoint for tests and demos: GET /v1/payments/{key} answers\n"
      "what the truth file (JSON lines: key, status, amount_minor, currency, id; re-read when it\n"
      "changes) says, 404 for a key it never saw; POST /v1/payments/query takes the key in its\n"
      "body ({\"key\": ...} as JSON, or key=... as a form). Prints \"listening on HOST:PORT\" "
      "once\n"
      "bound.");
  cli.text("listen", "HOST:PORT", "where to listen (port 0: any free port)", options.listen);
  cli.text("truth", "FILE", "the JSON lines saying what happened to each key", options.truth);
  cli.text("tls-cert", "FILE", "serve HTTPS with this certificate chain (PEM)", options.tlsCert);
  cli.text("tls-key", "FILE", "the certificate's private key (PEM)", options.tlsKey);
  cli.integer("delay-ms", "N", "answer N milliseconds late", options.delayMs, 0, 600'000);
  cli.number("fail-rate", "R", "answer this share of requests with 500", options.failRate, 0, 1);
  cli.custom("rate-limit", "N/s", "answer 429 with Retry-After beyond N requests a second", "",
             [&](const std::string& text) {
               char* end = nullptr;
               const long n = std::strtol(text.c_str(), &end, 10);
               if (n <= 0 || std::string_view(end) != "/s") {
                 throw idem::badValue("rate-limit", "N/s such as 5/s", text);
               }
               options.ratePerSecond = static_cast<int>(n);
             });
  cli.each("lie-amount", "KEY", "answer this key with another amount (100 minor units more)",
           [&](const std::string& key) { options.lieAmount.insert(key); });
  cli.text("require-auth", "FILE",
           "answer 401 unless the request carries Authorization: Bearer <the file's first line>",
           options.requireAuth);
  cli.check([&] {
    if (options.tlsCert.has_value() != options.tlsKey.has_value()) {
      throw idem::UsageError("--tls-cert and --tls-key come together");
    }
  });
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!cli.parse(args, std::cout)) return 0;

  const std::size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos) throw idem::badValue("listen", "HOST:PORT", options.listen);
  std::string host = options.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) throw idem::badValue("listen", "an IP address and a port", options.listen);
  const unsigned long port = std::stoul(options.listen.substr(colon + 1));
  if (port > 65535) throw idem::badValue("listen", "a port up to 65535", options.listen);

  std::optional<net::ssl::context> tls;
  if (options.tlsCert) {
    tls.emplace(net::ssl::context::tls_server);
    tls->use_certificate_chain_file(*options.tlsCert);
    tls->use_private_key_file(*options.tlsKey, net::ssl::context::pem);
  }

  Server server(options);
  net::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(address, static_cast<unsigned short>(port)));
  const tcp::endpoint bound = acceptor.local_endpoint();
  const std::string shown = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                                    : bound.address().to_string();
  std::cout << "listening on " << shown << ":" << bound.port() << "\n" << std::flush;
  for (;;) {
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (ec) continue;
    std::thread(serve, std::ref(server), tls ? &*tls : nullptr, std::move(socket)).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  return idem::guardedMain("idemwatch-gateway-standin", [&] { return run(argc, argv); });
}

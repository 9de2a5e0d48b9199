#include "through_proxy.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

namespace idem::sim {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A blocking socket's reads and writes give up after `seconds` (a stuck peer never holds a
// thread for ever).
void limitWaits(tcp::socket& socket, int seconds) {
  const timeval limit{seconds, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

std::string text(beast::string_view view) {
  return {view.data(), view.size()};
}

std::string unquoted(std::string_view text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    text = text.substr(1, text.size() - 2);
  }
  return std::string(text);
}

}  // namespace

std::pair<std::string, std::string> proxyAddress(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  const std::string_view rest =
      std::string_view(url).substr(url.starts_with(kScheme) ? kScheme.size() : 0);
  const auto colon = rest.rfind(':');
  const std::string_view host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
  const std::string_view port =
      colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos &&
                      std::stoi(std::string(port)) <= 65535;
  if (!url.starts_with(kScheme) || host.empty() || !digits || rest.find('/') != std::string::npos) {
    throw std::invalid_argument("'" + url + "' is not http://HOST:PORT");
  }
  return {std::string(host), std::string(port)};
}

// --- the tool ----------------------------------------------------------------------------------

struct ToolServer::State {
  const SimulationConfig& config;
  TrafficCounters& counters;
  Downstream& downstream;
  net::io_context io;
  tcp::acceptor acceptor{io};
  std::atomic<bool> stopping{false};
  // A connection's socket outlives its thread (declared last: joined first), so that a stop can
  // shut an idle keep-alive connection down from outside without racing its close.
  struct Connection {
    explicit Connection(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::atomic<bool> done{false};
    std::jthread thread;
  };
  std::mutex mutex;
  std::list<Connection> connections;  // finished ones are joined at the next accept
  std::set<std::string> refusedOnce;  // keys whose first request the tool turned away
  std::jthread accepting;

  State(const SimulationConfig& c, TrafficCounters& n, Downstream& d)
      : config(c), counters(n), downstream(d) {}

  // The downstream acts once, or twice when it is buggy, under the record's key.
  std::string act(const OperationPlan& plan, const std::string& key) {
    std::string ref;
    for (int i = 1; i <= (plan.doubleCharge ? 2 : 1); ++i) {
      const SideEffect done = downstream.execute(plan, key, i, i > 1);
      if (ref.empty()) ref = done.ref;
      if (plan.flowKind == FundFlowKind::Debit) counters.charges.fetch_add(1);
      if (i > 1) counters.doubleCharges.fetch_add(1);
    }
    return ref;
  }

  // The answer to one request; none when the tool acts and its answer is lost on the way back.
  std::optional<http::response<http::string_body>> answer(
      const http::request<http::string_body>& request) {
    http::response<http::string_body> res;
    res.version(request.version());
    res.set(http::field::content_type, "application/json");
    const auto reply = [&res](http::status status, const nlohmann::json& body) {
      res.result(status);
      res.body() = body.dump();
      res.prepare_payload();
      return res;
    };
    const std::string target = text(request.target());
    const auto slash = target.find('/', 1);
    const nlohmann::json body = nlohmann::json::parse(request.body(), nullptr, false);
    if (request.method() != http::verb::post || slash == std::string::npos || !body.is_object() ||
        !body.contains("index") || !body["index"].is_number_integer()) {
      return reply(http::status::bad_request,
                   {{"error", "expected POST /TOOL/BIZ_ID with the operation's index"}});
    }
    const OperationPlan plan = planOperation(config, body["index"].get<std::int64_t>());
    const std::string tool = target.substr(1, slash - 1);
    if (tool != plan.tool || target.substr(slash + 1) != plan.bizId) {
      return reply(http::status::bad_request,
                   {{"error", target + " is not operation " + std::to_string(plan.index)}});
    }
    const auto field = request.find("Idempotency-Key");
    const std::string key =
        "POST " + tool + " " + (field == request.end() ? plan.key : unquoted(text(field->value())));
    if (config.downstreamLatency.count() > 0) std::this_thread::sleep_for(config.downstreamLatency);
    switch (plan.fault) {
      case Fault::Declined:
        counters.declines.fetch_add(1);
        return reply(http::status::payment_required, {{"error", "card declined by issuer"}});
      case Fault::ConnectionRefused: {
        std::lock_guard lock(mutex);
        if (refusedOnce.insert(key).second) {
          counters.refusedConnections.fetch_add(1);
          return reply(http::status::service_unavailable,
                       {{"error", "refused before acting: nothing was done"}});
        }
        break;
      }
      case Fault::ResponseLost:
        act(plan, key);
        counters.responsesLost.fetch_add(1);
        return std::nullopt;
      default:
        break;
    }
    return reply(http::status::created, {{"ref", act(plan, key)}, {"status", "succeeded"}});
  }

  void serve(tcp::socket& socket) {
    limitWaits(socket, 30);
    beast::flat_buffer buffer;
    beast::error_code ec;
    for (;;) {
      http::request<http::string_body> request;
      http::read(socket, buffer, request, ec);
      if (ec) break;
      auto res = answer(request);
      if (!res) break;  // acted; the answer never leaves
      res->keep_alive(request.keep_alive());
      http::write(socket, *res, ec);
      if (ec || !res->keep_alive()) break;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void accept() {
    while (!stopping.load()) {
      beast::error_code ec;
      tcp::socket socket(io);
      acceptor.accept(socket, ec);
      if (ec == net::error::would_block || ec == net::error::try_again) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      if (ec) continue;
      socket.non_blocking(false, ec);
      std::lock_guard lock(mutex);
      // A run of hours makes thousands of connections: each is joined once it has ended.
      connections.remove_if([](const Connection& c) { return c.done.load(); });
      Connection& c = connections.emplace_back(std::move(socket));
      c.thread = std::jthread([this, &c] {
        serve(c.socket);
        c.done.store(true);
      });
    }
  }
};

ToolServer::ToolServer(const SimulationConfig& config, TrafficCounters& counters,
                       Downstream& downstream)
    : state_(std::make_unique<State>(config, counters, downstream)) {
  const auto [host, port] = proxyAddress("http://" + config.toolListen);
  try {
    const tcp::endpoint endpoint(net::ip::make_address(host),
                                 static_cast<unsigned short>(std::stoi(port)));
    state_->acceptor.open(endpoint.protocol());
    state_->acceptor.set_option(net::socket_base::reuse_address(true));
    state_->acceptor.bind(endpoint);
    state_->acceptor.listen();
    state_->acceptor.non_blocking(true);
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("--tool-listen " + config.toolListen +
                             ": cannot listen there (an IP address and a free port): " + e.what());
  }
  state_->accepting = std::jthread([s = state_.get()] { s->accept(); });
}

ToolServer::~ToolServer() {
  state_->stopping.store(true);
  state_->accepting = {};
  std::list<State::Connection> connections;
  {
    std::lock_guard lock(state_->mutex);
    connections.swap(state_->connections);
  }
  // The agents are done: what is still open is idle (an upstream connection the proxy keeps).
  for (State::Connection& c : connections) ::shutdown(c.socket.native_handle(), SHUT_RDWR);
  connections.clear();
}

// --- the agents --------------------------------------------------------------------------------

HttpAgent::HttpAgent(std::string id, const SimulationConfig& config, TrafficCounters& counters)
    : id_(std::move(id)), config_(config), counters_(counters) {
  std::tie(host_, port_) = proxyAddress(config.throughProxy);
}

std::optional<HttpAgent::Answer> HttpAgent::send(const OperationPlan& plan, TriggerSource source,
                                                 bool changed, const std::string& key) {
  nlohmann::json body{{"index", plan.index}, {"amount_minor", plan.amountMinor}};
  if (changed) body["note"] = "the model rewrote the arguments";
  http::request<http::string_body> req{http::verb::post, "/" + plan.tool + "/" + plan.bizId, 11};
  req.set(http::field::host, host_ + ":" + port_);
  req.set(http::field::content_type, "application/json");
  req.set("Idempotency-Key", "\"" + key + "\"");
  if (source != TriggerSource::Initial) req.set("Idempotency-Trigger", std::string(format(source)));
  char trace[64];
  std::snprintf(trace, sizeof trace, "00-%016llx%016llx-%016llx-01",
                static_cast<unsigned long long>(std::hash<std::string>{}(id_)),
                static_cast<unsigned long long>(++traces_),
                static_cast<unsigned long long>(plan.index) + 1);
  req.set("traceparent", trace);
  req.set("X-Agent-Id", id_);
  req.body() = body.dump();
  req.keep_alive(false);
  req.prepare_payload();
  Answer out;
  try {
    net::io_context io;
    tcp::socket socket(io);
    tcp::resolver resolver(io);
    net::connect(socket, resolver.resolve(host_, port_));
    limitWaits(socket, 120);
    http::write(socket, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    out.status = static_cast<int>(res.result_int());
    out.replayed = res["Idempotent-Replayed"] == "true";
    if (res[http::field::content_type] == "application/problem+json") {
      const nlohmann::json problem = nlohmann::json::parse(res.body(), nullptr, false);
      constexpr std::string_view kPrefix = "urn:idemwatch:problem:";
      const std::string type = problem.is_object() ? problem.value("type", "") : "";
      out.problem = type.starts_with(kPrefix) ? type.substr(kPrefix.size()) : type;
    }
  } catch (const std::exception&) {
    counters_.errors.fetch_add(1);
    return std::nullopt;
  }
  // What idem.begin answered, as the proxy's answer shows it: a replay, a problem it names, or
  // the upstream's own answer to a claim this request won (whatever its status).
  static const std::map<std::string, Outcome, std::less<>> kProblems{
      {"request-in-progress", Outcome::InProgress},
      {"outcome-unknown", Outcome::InProgress},  // 409: a repeat; 502/504: this request's claim
      {"payload_mismatch", Outcome::PayloadMismatch},
      {"business-object-taken", Outcome::Rejected},
      {"key-retired", Outcome::Retired},
      {"failed", Outcome::Replayed},
      {"completed-without-response", Outcome::Replayed},
      {"upstream-unreachable", Outcome::Executed},
      {"claim-late", Outcome::Executed}};
  std::optional<Outcome> outcome;
  if (out.replayed) {
    outcome = Outcome::Replayed;
  } else if (out.problem.empty() || (out.problem == "outcome-unknown" && out.status != 409)) {
    outcome = Outcome::Executed;  // the upstream's own answer, or its lost one
  } else if (const auto it = kProblems.find(out.problem); it != kProblems.end()) {
    outcome = it->second;
  }
  if (outcome) {
    counters_.countAttempt(source, *outcome);
  } else {
    counters_.errors.fetch_add(1);  // refused before any claim: no key, no database, ...
  }
  return out;
}

void HttpAgent::run(const OperationPlan& plan, bool isCopy) {
  const auto first = send(plan, TriggerSource::Initial, false, plan.key);
  if (isCopy || !first) return;
  if (first->status == 503) {
    // Not executed (the tool's refusal, or a claim given back): the framework retries it.
    send(plan, TriggerSource::Framework, false, plan.key);
  } else if (first->status == 402) {
    // Final: the framework's retry is handed the same failure back, for the model.
    const auto again = send(plan, TriggerSource::Framework, false, plan.key);
    if (again && again->replayed) counters_.finalFailuresReplayed.fetch_add(1);
  } else if (first->problem == "outcome-unknown") {
    send(plan, TriggerSource::Http, false, plan.key);  // the HTTP client retries: 409, not sent
  }
  for (const Retry& retry : plan.retries) {
    send(plan, retry.source, retry.changedArguments,
         retry.freshKey ? plan.bizId + ":" + plan.tool + ":2" : plan.key);
  }
}

}  // namespace idem::sim

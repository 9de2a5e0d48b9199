// The simulator's traffic through idemwatch-proxy instead of the protocol in-process: the
// downstream becomes an HTTP tool (the proxy's upstream) and each agent an HTTP client that knows
// nothing of idem.begin, only Idempotency-Key, as a team that does not touch its tools deploys the
// proxy. The proxy is then the claimant: it claims, calls the tool once, reports, replays.
//
// The tool serves POST /TOOL/BIZ_ID (a route per tool, named after it, forwarding the path) with
// the operation's index in the body, and plays the plan's faults where an upstream can: a lost
// response (it acts, then closes the connection unanswered), a declined card (402, nothing done),
// a refusal before acting (503 the first time, which the route lists in not_executed_statuses),
// the buggy second charge. An agent's crash has no counterpart behind a proxy (the proxy carries
// the claim through), and a careless client's holes are the protocol's, not HTTP's: such runs
// refuse --careless-rate. Effects are made under the record's key as the proxy scopes it
// ("POST TOOL KEY"), so the gateway's ledger lines, the operator and the reconciler find them.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "downstream.hpp"
#include "plan.hpp"
#include "traffic_counters.hpp"

namespace idem::sim {

// The downstream as an HTTP upstream, listening on config.toolListen until destroyed.
class ToolServer {
 public:
  ToolServer(const SimulationConfig& config, TrafficCounters& counters, Downstream& downstream);
  ~ToolServer();
  ToolServer(const ToolServer&) = delete;
  ToolServer& operator=(const ToolServer&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One agent's requests for an operation, through the proxy at config.throughProxy: the initial
// request, the retries its plan holds, and the retries a runtime makes of an answer that allows
// one (503 with a retry allowed, a replayed failure handed to the model).
class HttpAgent {
 public:
  HttpAgent(std::string id, const SimulationConfig& config, TrafficCounters& counters);
  void run(const OperationPlan& plan, bool isCopy);

 private:
  struct Answer {
    int status = 0;
    std::string problem;  // the problem type the proxy named, after its URN prefix
    bool replayed = false;
  };
  std::optional<Answer> send(const OperationPlan& plan, TriggerSource source, bool changed,
                             const std::string& key);

  std::string id_;
  const SimulationConfig& config_;
  TrafficCounters& counters_;
  std::string host_;
  std::string port_;
  std::int64_t traces_ = 0;
};

// "http://HOST:PORT" (no path) into host and port; throws std::invalid_argument naming the URL.
std::pair<std::string, std::string> proxyAddress(const std::string& url);

}  // namespace idem::sim

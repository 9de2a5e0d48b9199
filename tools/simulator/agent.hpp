// One simulated agent: a thread with its own connection that runs operations through the protocol
// the way a well-behaved agent runtime would (begin, downstream, complete/fail/mark_unknown), while
// the plan injects the retries and faults of the real world.
#pragma once

#include <memory>
#include <pqxx/connection>
#include <string>

#include "idem/protocol_client.hpp"
#include "plan.hpp"
#include "traffic_counters.hpp"

namespace idem::sim {

class Agent {
 public:
  Agent(std::string id, const SimulationConfig& config, TrafficCounters& counters);

  // Runs the request that reaches this agent for the plan: the initial one, or one of the
  // concurrent copies. Whoever gets `executed` carries the operation through.
  void run(const OperationPlan& plan, bool isCopy);

  // Drops a broken connection; the next run() reconnects.
  void resetConnection();

 private:
  ProtocolClient& client();
  BeginResult begin(const OperationPlan& plan, TriggerSource source, bool changedArguments = false,
                    const std::string& keyOverride = {});
  void carryOut(const OperationPlan& plan, const std::string& key, int version);
  void charge(const OperationPlan& plan, const std::string& key);
  void downstreamLatency() const;

  std::string id_;
  const SimulationConfig& config_;
  TrafficCounters& counters_;
  std::unique_ptr<pqxx::connection> connection_;
  std::unique_ptr<ProtocolClient> client_;
  std::int64_t traces_ = 0;
};

}  // namespace idem::sim

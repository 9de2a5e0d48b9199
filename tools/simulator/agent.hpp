// One simulated agent: a thread with its own connection that runs operations through the protocol
// the way a correct agent runtime does under schema contract v2 (begin; downstream; complete,
// fail or mark_unknown with the claim token), while the plan injects the retries and faults of the
// real world. An operation whose plan is careless also has its client try the holes v2 closes,
// each counted as tried and, if the database said no, refused.
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
  void carryOut(const OperationPlan& plan, const Claim& claim);
  // The claimant's complete; on conflict or not_claimant it re-reads instead of re-running.
  void complete(const OperationPlan& plan, const Claim& claim);
  void reread(const OperationPlan& plan, const std::string& key);
  // `careless`: a charge through a hole the database left open, under gateway references of its
  // own, so that the ledger shows it as the extra charge it is.
  void charge(const OperationPlan& plan, const std::string& key, bool careless = false);
  void downstreamLatency() const;

  // The careless client's tries; each counts tried / refused. A hole the database left open is
  // used the way a careless client would: it goes downstream again.
  void tryForeignClaim(const OperationPlan& plan, const Claim& claim);
  void tryFailUnknown(const OperationPlan& plan, const Claim& unknown);
  void tryBegin(const OperationPlan& plan, CarelessHole hole, const std::string& key);
  void count(CarelessHole hole, bool refused);
  std::string strangerToken();

  std::string id_;
  const SimulationConfig& config_;
  TrafficCounters& counters_;
  std::unique_ptr<pqxx::connection> connection_;
  std::unique_ptr<ProtocolClient> client_;
  std::int64_t traces_ = 0;
  SplitMix64 tokens_;
};

}  // namespace idem::sim

// One simulated agent: a thread with its own connection that runs operations through the protocol
// the way a correct agent runtime does under schema contract v3 (begin; downstream; report its own
// side effect and complete, fail or mark_unknown, all with the claim token), while the plan
// injects the retries and faults of the real world. An operation whose plan is careless also has
// its client try the holes the schema closes, each counted as tried and, if the database said no,
// refused.
#pragma once

#include <memory>
#include <pqxx/connection>
#include <string>

#include "downstream.hpp"
#include "idem/protocol_client.hpp"
#include "plan.hpp"
#include "traffic_counters.hpp"

namespace idem::sim {

class Agent {
 public:
  Agent(std::string id, const SimulationConfig& config, TrafficCounters& counters,
        Downstream& downstream);

  // Runs the request that reaches this agent for the plan: the initial one, or one of the
  // concurrent copies. Whoever gets `executed` carries the operation through.
  void run(const OperationPlan& plan, bool isCopy);

  // Drops a broken connection; the next run() reconnects.
  void resetConnection();

 private:
  ProtocolClient& client();
  // call(client()), sent again on a new connection while the connection breaks (agent.cpp).
  template <typename Call>
  auto resent(Call&& call) -> decltype(call(std::declval<ProtocolClient&>()));
  BeginResult begin(const OperationPlan& plan, TriggerSource source, bool changedArguments = false,
                    const std::string& keyOverride = {});
  void carryOut(const OperationPlan& plan, const Claim& claim);
  // The claimant's complete. A late answer (the lease ran out and the record went UNKNOWN: a
  // conflict that hands back UNKNOWN and its version) is reported again at that version; any
  // other conflict or not_claimant re-reads instead of re-running.
  void complete(const OperationPlan& plan, const Claim& claim);
  void reread(const OperationPlan& plan, const std::string& key,
              const std::vector<SideEffect>& done);
  // The downstream acts (the buggy one twice): one side effect per execution, in its own records.
  std::vector<SideEffect> act(const OperationPlan& plan, const std::string& key,
                              bool careless = false);
  // The claimant heard back: it reports its own side effects to the ledger with its token.
  void report(const std::vector<SideEffect>& done, const Claim& claim);
  void downstreamLatency() const;

  // The careless client's tries; each counts tried / refused. A hole the database left open is
  // used the way a careless client would: it goes downstream again.
  void tryForeignClaim(const OperationPlan& plan, const Claim& claim);
  void tryFailUnknown(const OperationPlan& plan, const Claim& unknown);
  void tryBegin(const OperationPlan& plan, CarelessHole hole, const std::string& key);
  void tryForgeEvidence(const OperationPlan& plan, const Claim& unknown);
  void count(CarelessHole hole, bool refused);
  std::string strangerToken();

  std::string id_;
  const SimulationConfig& config_;
  TrafficCounters& counters_;
  Downstream& downstream_;
  std::unique_ptr<pqxx::connection> connection_;
  std::unique_ptr<ProtocolClient> client_;
  std::int64_t traces_ = 0;
  SplitMix64 tokens_;
};

}  // namespace idem::sim

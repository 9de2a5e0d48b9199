#include "agent.hpp"

#include <thread>

#include "idem/database_error.hpp"

namespace idem::sim {

Agent::Agent(std::string id, const SimulationConfig& config, TrafficCounters& counters)
    : id_(std::move(id)), config_(config), counters_(counters) {}

ProtocolClient& Agent::client() {
  if (!client_) {
    connection_ = connect(config_.connection);
    client_ = std::make_unique<ProtocolClient>(*connection_);
  }
  return *client_;
}

void Agent::resetConnection() {
  client_.reset();
  connection_.reset();
}

BeginResult Agent::begin(const OperationPlan& plan, TriggerSource source, bool changedArguments,
                         const std::string& keyOverride) {
  BeginRequest request;
  request.key = keyOverride.empty() ? plan.key : keyOverride;
  request.bizType = plan.bizType;
  request.bizId = plan.bizId;
  request.tool = plan.tool;
  request.source = source;
  request.requestPayload = plan.requestPayload(changedArguments);
  request.lease = config_.lease;
  request.agentId = id_;
  request.traceId = id_ + "-" + std::to_string(++traces_);
  BeginResult result = client().begin(request);
  counters_.countAttempt(source, result.outcome);
  return result;
}

void Agent::downstreamLatency() const {
  if (config_.downstreamLatency.count() > 0) std::this_thread::sleep_for(config_.downstreamLatency);
}

// The downstream books the money; the buggy one books it twice under two references.
void Agent::charge(const OperationPlan& plan, const std::string& key) {
  downstreamLatency();
  if (!plan.flowKind) return;
  const int times = plan.doubleCharge ? 2 : 1;
  for (int n = 1; n <= times; ++n) {
    const FundFlowResult r = client().recordFundFlow(
        {plan.bizType, plan.bizId, *plan.flowKind, plan.amountMinor, "CNY", plan.gatewayRef(n), key});
    if (*plan.flowKind == FundFlowKind::Debit) counters_.charges.fetch_add(1);
    if (r.isDuplicate) counters_.doubleCharges.fetch_add(1);
  }
}

// The owner of the record goes downstream and reports back, as the protocol asks.
void Agent::carryOut(const OperationPlan& plan, const std::string& key, int version) {
  switch (plan.fault) {
    case Fault::CrashBeforeCharge:
      counters_.crashes.fetch_add(1);
      return;  // PROCESSING until the lease runs out; no money moved
    case Fault::Declined: {
      downstreamLatency();
      const ChangeResult failed = client().fail(key, version, "card declined by issuer");
      counters_.declines.fetch_add(1);
      if (!failed.ok()) return;
      // A definite failure may be retried: the framework's retry policy sends it again.
      const BeginResult again = begin(plan, TriggerSource::Framework);
      if (again.outcome != Outcome::Executed) return;
      charge(plan, key);
      client().complete(key, *again.version, plan.responsePayload());
      return;
    }
    case Fault::CrashAfterCharge:
      charge(plan, key);
      counters_.crashes.fetch_add(1);
      return;  // money moved, nobody recorded success: reconciliation's debit_without_success
    case Fault::ResponseLost: {
      charge(plan, key);
      // A timeout is "result unknown": never retried blind, handed to a reconciler or a person.
      const ChangeResult unknown =
          client().markUnknown(key, version, "no response from the gateway within 5s");
      counters_.responsesLost.fetch_add(1);
      begin(plan, TriggerSource::Http);  // the HTTP client retries anyway: in_progress, no charge
      if (unknown.ok() && plan.unknownResolvedByCallback) {
        begin(plan, TriggerSource::Callback);  // the gateway's callback re-drives it...
        // ...and carries the result, which settles the record.
        if (client().complete(key, *unknown.version, plan.responsePayload()).ok()) {
          counters_.unknownResolvedByCallback.fetch_add(1);
        }
      }
      return;
    }
    case Fault::None:
      charge(plan, key);
      client().complete(key, version, plan.responsePayload());
      return;
  }
}

void Agent::run(const OperationPlan& plan, bool isCopy) {
  const BeginResult first = begin(plan, TriggerSource::Initial);
  if (first.outcome == Outcome::Executed) carryOut(plan, plan.key, *first.version);
  if (isCopy) return;  // the retries belong to the operation, sent once

  for (const Retry& retry : plan.retries) {
    if (retry.freshKey) {
      const std::string freshKey = plan.bizId + ":" + plan.tool + ":2";
      const BeginResult r = begin(plan, retry.source, false, freshKey);
      // Only possible when every earlier try failed: then this is a legitimate new attempt.
      if (r.outcome == Outcome::Executed) {
        charge(plan, freshKey);
        client().complete(freshKey, *r.version, plan.responsePayload());
      }
      continue;
    }
    begin(plan, retry.source, retry.changedArguments);
  }
}

}  // namespace idem::sim

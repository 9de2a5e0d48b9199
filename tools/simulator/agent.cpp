#include "agent.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "idem/database_error.hpp"

namespace idem::sim {

Agent::Agent(std::string id, const SimulationConfig& config, TrafficCounters& counters,
             Downstream& downstream)
    : id_(std::move(id)),
      config_(config),
      counters_(counters),
      downstream_(downstream),
      tokens_(config.seed ^ std::hash<std::string>{}(id_)) {}

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

// A protocol call whose connection broke (a failover, a reset) may have committed or not: it is
// sent again, the same call with the same key, token and version, on a new connection, after
// each pause; its answer says where the first send left the record (a claim answers from the
// record, a report `ok` or a conflict the re-read settles). The downstream is never called again.
template <typename Call>
auto Agent::resent(Call&& call) -> decltype(call(std::declval<ProtocolClient&>())) {
  static constexpr std::array<std::chrono::milliseconds, 5> kPauses{
      std::chrono::milliseconds(200), std::chrono::milliseconds(500), std::chrono::seconds(1),
      std::chrono::seconds(2), std::chrono::seconds(4)};
  for (std::size_t n = 0;; ++n) {
    try {
      return call(client());
    } catch (const DatabaseError& e) {
      if (!e.endsSession() || n == kPauses.size()) throw;
      resetConnection();
      counters_.resent.fetch_add(1);
      std::this_thread::sleep_for(kPauses[n]);
    }
  }
}

// A claim whose answer arrives after its lease ran out is not acted on: while the answer was on
// its way (a commit waiting for a synchronous standby, a stalled connection) the record already
// looked abandoned, and an operator may have settled it FAILED on a downstream that showed
// nothing. The claimant gives the claim back instead (it certainly never went downstream: FAILED,
// retry allowed) and its framework retries with the same key, at most a few times.
BeginResult Agent::begin(const OperationPlan& plan, TriggerSource source, bool changedArguments,
                         const std::string& keyOverride) {
  static constexpr int kLateClaimRetries = 3;
  BeginRequest request;
  request.key = keyOverride.empty() ? plan.key : keyOverride;
  request.bizType = plan.bizType;
  request.bizId = plan.bizId;
  request.tool = plan.tool;
  request.source = source;
  request.requestPayload = plan.requestPayload(changedArguments);
  request.lease = config_.lease;
  request.agentId = id_;
  for (int late = 0;; ++late) {
    request.traceId = id_ + "-" + std::to_string(++traces_);
    std::chrono::steady_clock::time_point sent;
    BeginResult result = resent([&](ProtocolClient& c) {
      sent = std::chrono::steady_clock::now();
      return c.begin(request);
    });
    counters_.countAttempt(request.source, result.outcome);
    if (result.outcome == Outcome::Replayed && result.status == RecordStatus::Failed) {
      counters_.finalFailuresReplayed.fetch_add(1);  // handed back to the model, not run again
    }
    if (result.outcome != Outcome::Executed || !result.claimToken || !result.version ||
        std::chrono::steady_clock::now() - sent < config_.lease) {
      return result;
    }
    counters_.lateClaims.fetch_add(1);
    resent([&](ProtocolClient& c) {
      return c.fail(request.key, *result.version,
                    "the claim was acknowledged after its lease ran out; not sent downstream",
                    *result.claimToken, true);
    });
    if (late == kLateClaimRetries) {
      result.claimToken.reset();  // given back: nothing of it is this agent's to act on
      return result;
    }
    request.source = TriggerSource::Framework;
  }
}

void Agent::downstreamLatency() const {
  if (config_.downstreamLatency.count() > 0) std::this_thread::sleep_for(config_.downstreamLatency);
}

// The downstream acts: once, or, when it is buggy, twice under two references. A careless
// client's executions are numbered from 11 so that the ledger shows them for what they are.
std::vector<SideEffect> Agent::act(const OperationPlan& plan, const std::string& key,
                                   bool careless) {
  downstreamLatency();
  std::vector<SideEffect> done;
  const int times = plan.doubleCharge ? 2 : 1;
  for (int i = 1; i <= times; ++i) {
    done.push_back(downstream_.execute(plan, key, careless ? 10 + i : i, careless || i > 1));
    if (plan.flowKind == FundFlowKind::Debit) counters_.charges.fetch_add(1);
    if (i > 1) counters_.doubleCharges.fetch_add(1);
  }
  return done;
}

void Agent::report(const std::vector<SideEffect>& done, const Claim& claim) {
  for (const SideEffect& e : done) {
    if (!e.kind) continue;  // a coupon leaves no line in the ledger
    resent([&](ProtocolClient& c) {
      return c.recordFundFlow({e.bizType, e.bizId, *e.kind, e.amountMinor, "CNY", e.ref, e.key},
                              claim.token);
    });
  }
}

// Someone else decided the record (an operator, the reconciler) or the claim is no longer ours:
// look at what the record says now. If the database hands the key back to us (`executed`: it was
// settled FAILED as not having happened), this agent knows its downstream call did happen and
// reports it, without calling downstream again.
void Agent::reread(const OperationPlan& plan, const std::string& key,
                   const std::vector<SideEffect>& done) {
  counters_.rereads.fetch_add(1);
  const BeginResult now = begin(plan, TriggerSource::Framework, false, key);
  if (now.outcome == Outcome::Executed && now.claimToken) {
    const Claim again{key, *now.version, *now.claimToken};
    report(done, again);
    resent([&](ProtocolClient& c) {
      return c.complete(key, again.version, plan.responsePayload(), again.token);
    });
  }
}

void Agent::complete(const OperationPlan& plan, const Claim& claim) {
  ChangeResult done = resent([&](ProtocolClient& c) {
    return c.complete(claim.key, claim.version, plan.responsePayload(), claim.token);
  });
  if (done.result == ResultCode::Conflict && done.status == RecordStatus::Unknown && done.version) {
    // The lease ran out while the downstream answered and the sweeper made the record UNKNOWN:
    // this answer is still the answer, late (UNKNOWN -> SUCCESS by the claimant).
    done = resent([&](ProtocolClient& c) {
      return c.complete(claim.key, *done.version, plan.responsePayload(), claim.token);
    });
    if (done.ok()) counters_.lateAnswers.fetch_add(1);
  }
  if (done.result == ResultCode::Conflict || done.result == ResultCode::NotClaimant) {
    reread(plan, claim.key, downstream_.effectsOf(claim.key));
  }
}

// The owner of the record goes downstream and reports back, as the protocol asks.
void Agent::carryOut(const OperationPlan& plan, const Claim& claim) {
  if (plan.careless) tryForeignClaim(plan, claim);
  switch (plan.fault) {
    case Fault::CrashBeforeCharge:
      counters_.crashes.fetch_add(1);
      return;  // PROCESSING until the lease runs out; nothing happened downstream
    case Fault::Declined: {
      downstreamLatency();
      // A definite business failure: final. The framework's retry is replayed the error, and the
      // model gets it back to change its plan.
      const ChangeResult failed = resent([&](ProtocolClient& c) {
        return c.fail(claim.key, claim.version, "card declined by issuer", claim.token, false);
      });
      counters_.declines.fetch_add(1);
      if (!failed.ok()) return;
      const BeginResult again = begin(plan, TriggerSource::Framework);
      if (again.outcome == Outcome::Executed && again.claimToken) {  // would be a hole
        const Claim second{claim.key, *again.version, *again.claimToken};
        report(act(plan, claim.key), second);
        complete(plan, second);
      }
      if (plan.careless) tryBegin(plan, CarelessHole::RetryFinalFailure, claim.key);
      return;
    }
    case Fault::ConnectionRefused: {
      // The request never left this machine: the failure may be retried, with the same key.
      const ChangeResult failed = resent([&](ProtocolClient& c) {
        return c.fail(claim.key, claim.version, "connection refused before sending", claim.token,
                      true);
      });
      counters_.refusedConnections.fetch_add(1);
      if (!failed.ok()) return;
      const BeginResult again = begin(plan, TriggerSource::Framework);
      if (again.outcome != Outcome::Executed || !again.claimToken) return;
      const Claim second{claim.key, *again.version, *again.claimToken};
      report(act(plan, claim.key), second);
      complete(plan, second);
      return;
    }
    case Fault::CrashAfterCharge:
      act(plan, claim.key);
      counters_.crashes.fetch_add(1);
      return;  // it happened, nobody heard back: the gateway's word, reconcile or a person
    case Fault::ResponseLost: {
      // The downstream acted; the agent never heard back, so it has nothing to report but that it
      // cannot know. A timeout is "result unknown": never retried blind.
      const std::vector<SideEffect> done = act(plan, claim.key);
      const ChangeResult unknown = resent([&](ProtocolClient& c) {
        return c.markUnknown(claim.key, claim.version, "no response from the gateway within 5s",
                             claim.token);
      });
      counters_.responsesLost.fetch_add(1);
      begin(plan, TriggerSource::Http);  // the HTTP client retries anyway: in_progress, no charge
      if (!unknown.ok()) {
        if (unknown.result == ResultCode::Conflict) reread(plan, claim.key, done);
        return;
      }
      const Claim late{claim.key, *unknown.version, claim.token};
      if (plan.careless) {
        tryForgeEvidence(plan, late);
        tryFailUnknown(plan, late);
      }
      if (plan.unknownResolvedByCallback) {
        begin(plan, TriggerSource::Callback);  // the gateway's callback re-drives it...
        // ...and carries the result: the claimant reports it, late, with its token.
        report(done, late);
        const ChangeResult completed = resent([&](ProtocolClient& c) {
          return c.complete(late.key, late.version, plan.responsePayload(), late.token);
        });
        if (completed.ok()) {
          counters_.unknownResolvedByCallback.fetch_add(1);
        } else if (completed.result == ResultCode::Conflict ||
                   completed.result == ResultCode::NotClaimant) {
          reread(plan, late.key, done);  // an operator or the reconciler decided first
        }
      }
      return;
    }
    case Fault::None:
      report(act(plan, claim.key), claim);
      complete(plan, claim);
      if (plan.careless) {
        tryBegin(plan, CarelessHole::NewKeyForPaidObject, plan.bizId + ":" + plan.tool + ":again");
      }
      return;
  }
}

void Agent::run(const OperationPlan& plan, bool isCopy) {
  const BeginResult first = begin(plan, TriggerSource::Initial);
  if (first.outcome == Outcome::Executed && first.claimToken) {
    carryOut(plan, {plan.key, *first.version, *first.claimToken});
  }
  if (first.outcome == Outcome::Retired && plan.careless && !isCopy) {
    // Retention removed the record: a careless client tries it again, then under a fresh key.
    tryBegin(plan, CarelessHole::RebeginRetired, plan.key);
    tryBegin(plan, CarelessHole::RebeginRetired, plan.bizId + ":" + plan.tool + ":again");
  }
  if (isCopy) return;  // the retries belong to the operation, sent once

  for (const Retry& retry : plan.retries) {
    if (retry.freshKey) {
      const std::string freshKey = plan.bizId + ":" + plan.tool + ":2";
      const BeginResult r = begin(plan, retry.source, false, freshKey);
      // Only possible when every earlier try failed: then this is a legitimate new attempt.
      if (r.outcome == Outcome::Executed && r.claimToken) {
        const Claim fresh{freshKey, *r.version, *r.claimToken};
        report(act(plan, freshKey), fresh);
        complete(plan, fresh);
      }
      continue;
    }
    begin(plan, retry.source, retry.changedArguments);
  }
}

// --- the careless client ---------------------------------------------------------------------

namespace {

// A careless call the database turned down, by a result code or by an error (a bound, a
// permission). An error that ends the session is not an answer: it propagates like any other.
template <typename Call>
bool refused(Call&& call) {
  try {
    return !call().ok();
  } catch (const DatabaseError& e) {
    if (e.endsSession()) throw;
    return true;
  }
}

}  // namespace

void Agent::count(CarelessHole hole, bool refused) {
  counters_.countHole(hole, refused);
}

std::string Agent::strangerToken() {
  const std::uint64_t a = tokens_.next(), b = tokens_.next();
  char text[40];
  std::snprintf(text, sizeof text, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>((b >> 48) & 0xfff),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return text;
}

// While the claimant is downstream, a second writer with the same key but other arguments is
// told payload_mismatch and the record's version, then tries to finish the claim itself: with a
// token of its own, and with a stale version and none. It also tries to fail it without a token.
// The claimant's own complete must still go through afterwards.
void Agent::tryForeignClaim(const OperationPlan& plan, const Claim& claim) {
  const BeginResult seen = begin(plan, TriggerSource::Llm, true);
  const int version = seen.version.value_or(claim.version);
  const std::string stranger = R"({"status": "ok", "gateway_ref": "stranger"})";
  count(CarelessHole::CompleteForeignClaim,
        refused([&] { return client().complete(claim.key, version, stranger, strangerToken()); }));
  count(CarelessHole::CompleteStaleVersion,
        refused([&] { return client().complete(claim.key, version - 1, stranger, ""); }));
  count(CarelessHole::FailWithoutToken,
        refused([&] { return client().fail(claim.key, version, "gave up waiting", "", true); }));
}

// The v1 hole: fail an UNKNOWN record with no token, so that the next begin re-executes it.
void Agent::tryFailUnknown(const OperationPlan& plan, const Claim& unknown) {
  const bool failRefused =
      refused([&] { return client().fail(unknown.key, unknown.version, "gave up", "", true); }) &&
      refused([&] {
        return client().fail(unknown.key, unknown.version, "gave up", strangerToken(), true);
      });
  const BeginResult again = begin(plan, TriggerSource::Framework);
  const bool beginRefused = again.outcome != Outcome::Executed;
  if (!beginRefused && again.claimToken) {  // the hole is open: it charges again
    const Claim stolen{unknown.key, *again.version, *again.claimToken};
    report(act(plan, unknown.key, true), stolen);
    client().complete(unknown.key, stolen.version, plan.responsePayload(2), stolen.token);
  }
  count(CarelessHole::FailUnknownWithoutToken, failRefused && beginRefused);
}

void Agent::tryBegin(const OperationPlan& plan, CarelessHole hole, const std::string& key) {
  const BeginResult r = begin(plan, TriggerSource::Llm, false, key);
  const bool refused = r.outcome != Outcome::Executed;
  if (!refused && r.claimToken) {  // the hole is open: the careless client charges again
    const Claim stolen{key, *r.version, *r.claimToken};
    report(act(plan, key, true), stolen);
    client().complete(key, stolen.version, plan.responsePayload(2), stolen.token);
  }
  count(hole, refused);
}

// Another agent's record is UNKNOWN: a careless writer without its claim token makes up the
// evidence that would settle it, a one-cent flow of the record's own kind under its key, first as
// a claimant with a token of its own, then as if it were the gateway. Had either gone through,
// idem.reconcile() would settle the record SUCCESS on a flow no downstream ever made (and a
// made-up REFUND would make a charge look given back).
void Agent::tryForgeEvidence(const OperationPlan& plan, const Claim& unknown) {
  const FundFlowInput forged{
      plan.bizType,           plan.bizId, plan.flowKind.value_or(FundFlowKind::Debit), 1, "CNY",
      "forged-" + plan.bizId, unknown.key};
  count(CarelessHole::ForgeEvidence,
        refused([&] {
          client().recordFundFlow(forged, strangerToken());
          return ChangeResult{ResultCode::Ok, std::nullopt, std::nullopt};
        }) &&
            refused([&] {
              client().recordFundFlow(forged);
              return ChangeResult{ResultCode::Ok, std::nullopt, std::nullopt};
            }));
}

}  // namespace idem::sim

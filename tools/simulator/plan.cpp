#include "plan.hpp"

#include <nlohmann/json.hpp>

namespace idem::sim {

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {

std::string toolFor(const std::string& bizType) {
  if (bizType == "payment") return "pay";
  if (bizType == "refund") return "refund";
  if (bizType == "coupon") return "issue_coupon";
  return bizType;
}

// The business ids' short prefix: each type its own, so that two types never share an id.
std::string codeFor(const std::string& bizType) {
  if (bizType == "payout") return "out";
  return bizType.substr(0, 3);
}

// Which ledger entry the downstream books for a business type: coupons move no money, a payout
// is a credit to the customer.
std::optional<FundFlowKind> flowFor(const std::string& bizType) {
  if (bizType.starts_with("coupon")) return std::nullopt;
  if (bizType.starts_with("refund")) return FundFlowKind::Refund;
  if (bizType.starts_with("payout")) return FundFlowKind::Credit;
  return FundFlowKind::Debit;
}

}  // namespace

OperationPlan planOperation(const SimulationConfig& config, std::int64_t index) {
  SplitMix64 rng(config.seed * 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(index));
  rng.next();

  OperationPlan p;
  p.index = index;
  p.bizType = config.bizTypes[rng.below(config.bizTypes.size())];
  const std::string id = std::to_string(index);
  p.bizId = (config.runId.empty() ? "" : config.runId + "-") + codeFor(p.bizType) + "-" + id;
  p.key = p.bizId + ":" + toolFor(p.bizType) + ":1";
  p.tool = toolFor(p.bizType);
  p.amountMinor = 100 + static_cast<std::int64_t>(rng.below(50'000));
  p.flowKind = flowFor(p.bizType);

  // One fault at most per operation, drawn from a single uniform so the rates add up.
  double u = rng.uniform();
  const double lost = config.responseLossRate;
  const double crash = lost + config.crashRate;
  const double decline = crash + config.declineRate;
  const double refused = decline + config.refusedRate;
  if (u < lost) {
    p.fault = Fault::ResponseLost;
  } else if (u < crash) {
    p.fault = rng.chance(config.crashBeforeChargeShare) ? Fault::CrashBeforeCharge
                                                        : Fault::CrashAfterCharge;
  } else if (u < decline) {
    p.fault = Fault::Declined;
  } else if (u < refused) {
    p.fault = Fault::ConnectionRefused;
  }
  p.unknownResolvedByCallback = rng.chance(config.callbackResolvesUnknownRate);
  p.doubleCharge = p.flowKind.has_value() && rng.chance(config.doubleChargeRate);
  if (rng.chance(config.concurrentDuplicateRate)) p.concurrentCopies = config.concurrentCopies;
  p.careless = rng.chance(config.carelessRate);

  if (rng.chance(config.llmRetryRate)) p.retries.push_back({TriggerSource::Llm, false, false});
  if (rng.chance(config.frameworkRetryRate))
    p.retries.push_back({TriggerSource::Framework, false, false});
  if (rng.chance(config.httpRetryRate)) p.retries.push_back({TriggerSource::Http, false, false});
  if (rng.chance(config.callbackRate)) p.retries.push_back({TriggerSource::Callback, false, false});
  if (rng.chance(config.mismatchRate)) p.retries.push_back({TriggerSource::Llm, true, false});
  if (rng.chance(config.newKeyRate)) p.retries.push_back({TriggerSource::Llm, false, true});
  return p;
}

std::string OperationPlan::requestPayload(bool changed) const {
  nlohmann::json j{{"biz_id", bizId},
                   {"amount_minor", changed ? amountMinor + 100 : amountMinor},
                   {"currency", "CNY"},
                   {"tool", tool}};
  if (changed) j["note"] = "arguments rewritten by the model";
  return j.dump();
}

std::string OperationPlan::responsePayload(int chargeNumber) const {
  return nlohmann::json{{"status", "ok"}, {"gateway_ref", gatewayRef(chargeNumber)}}.dump();
}

std::string OperationPlan::gatewayRef(int chargeNumber) const {
  return "gw-" + bizId + "-" + std::to_string(chargeNumber);
}

}  // namespace idem::sim

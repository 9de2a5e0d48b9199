// What happens to one simulated operation, decided up front from (seed, index) alone, so that a
// seed reproduces the same traffic whatever the thread interleaving.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "idem/vocabulary.hpp"
#include "simulator.hpp"

namespace idem::sim {

enum class Fault {
  None,
  ResponseLost,       // the downstream charged, the agent never heard back
  CrashBeforeCharge,  // the agent died after `executed`, before calling downstream
  CrashAfterCharge,   // ...after the downstream charged: money moved, no record of success
  Declined,           // the downstream refused: a definite failure, final (retry_allowed false)
  ConnectionRefused,  // the request never left: a failure that may be retried with the same key
};

// A later request for the same operation.
struct Retry {
  TriggerSource source = TriggerSource::Llm;
  bool changedArguments = false;  // an LLM retry that rewrote the arguments: payload mismatch
  bool freshKey = false;          // an LLM retry under a new key for the same business object
};

struct OperationPlan {
  std::int64_t index = 0;
  std::string key;
  std::string bizType;
  std::string bizId;
  std::string tool;
  std::int64_t amountMinor = 0;
  std::optional<FundFlowKind> flowKind;  // what the downstream books; none for coupons
  Fault fault = Fault::None;
  bool unknownResolvedByCallback = false;  // after ResponseLost: the gateway's callback settles it
  bool doubleCharge = false;               // the buggy downstream books a second charge
  int concurrentCopies = 1;                // the initial request delivered this many times at once
  bool careless = false;                   // its client tries the holes the schema closes
  std::vector<Retry> retries;

  std::string requestPayload(bool changed = false) const;
  std::string responsePayload(int chargeNumber = 1) const;
  std::string gatewayRef(int chargeNumber) const;
};

// A small, fast, well-mixed generator (SplitMix64): good enough for traffic, and identical on
// every platform, unlike the distributions of <random>.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return uniform() < p; }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }

 private:
  std::uint64_t state_;
};

OperationPlan planOperation(const SimulationConfig& config, std::int64_t index);

}  // namespace idem::sim

// Counters the agents share while the simulation runs: lock-free, read for progress lines and
// turned into the summary at the end.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "idem/vocabulary.hpp"
#include "simulator.hpp"

namespace idem::sim {

class TrafficCounters {
 public:
  void countAttempt(TriggerSource source, Outcome outcome) {
    attempts_[index(source, outcome)].fetch_add(1, std::memory_order_relaxed);
    attemptsTotal.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<std::int64_t> operations{0};
  std::atomic<std::int64_t> attemptsTotal{0};
  std::atomic<std::int64_t> charges{0};
  std::atomic<std::int64_t> doubleCharges{0};
  std::atomic<std::int64_t> responsesLost{0};
  std::atomic<std::int64_t> crashes{0};
  std::atomic<std::int64_t> declines{0};
  std::atomic<std::int64_t> refusedConnections{0};
  std::atomic<std::int64_t> finalFailuresReplayed{0};
  std::atomic<std::int64_t> rereads{0};
  std::atomic<std::int64_t> settledSuccess{0};
  std::atomic<std::int64_t> settledFailed{0};
  std::atomic<std::int64_t> settleRefused{0};
  std::atomic<std::int64_t> reconciled{0};
  std::atomic<std::int64_t> roundsFailed{0};
  std::atomic<std::int64_t> unknownResolvedByCallback{0};
  std::atomic<std::int64_t> lateAnswers{0};
  std::atomic<std::int64_t> lateClaims{0};
  std::atomic<std::int64_t> resent{0};
  std::atomic<std::int64_t> reportedByGateway{0};
  std::atomic<std::int64_t> errors{0};

  void countHole(CarelessHole hole, bool refused) {
    holesTried_[holeIndex(hole)].fetch_add(1, std::memory_order_relaxed);
    if (refused) holesRefused_[holeIndex(hole)].fetch_add(1);
  }

  SimulationSummary summary() const;

 private:
  static constexpr std::size_t index(TriggerSource s, Outcome o) {
    return indexOf(s) * kValueCount<Outcome> + indexOf(o);
  }
  // kCarelessHoles lists every hole in declaration order (simulator.hpp static_asserts it).
  static constexpr std::size_t holeIndex(CarelessHole hole) {
    return static_cast<std::size_t>(hole);
  }
  std::array<std::atomic<std::int64_t>, kValueCount<TriggerSource> * kValueCount<Outcome>>
      attempts_{};
  std::array<std::atomic<std::int64_t>, kCarelessHoles.size()> holesTried_{};
  std::array<std::atomic<std::int64_t>, kCarelessHoles.size()> holesRefused_{};
};

}  // namespace idem::sim

#include "traffic_counters.hpp"

#include <utility>

namespace idem::sim {
namespace {

using T = TrafficCounters;
using S = SimulationSummary;

// The counters the summary takes as they stand, each into its field of the same name.
constexpr std::pair<std::atomic<std::int64_t> T::*, std::int64_t S::*> kCounts[] = {
    {&T::operations, &S::operations},
    {&T::charges, &S::charges},
    {&T::doubleCharges, &S::doubleCharges},
    {&T::responsesLost, &S::responsesLost},
    {&T::crashes, &S::crashes},
    {&T::declines, &S::declines},
    {&T::refusedConnections, &S::refusedConnections},
    {&T::finalFailuresReplayed, &S::finalFailuresReplayed},
    {&T::rereads, &S::rereads},
    {&T::settledSuccess, &S::settledSuccess},
    {&T::settledFailed, &S::settledFailed},
    {&T::settleRefused, &S::settleRefused},
    {&T::reconciled, &S::reconciled},
    {&T::roundsFailed, &S::roundsFailed},
    {&T::unknownResolvedByCallback, &S::unknownResolvedByCallback},
    {&T::lateAnswers, &S::lateAnswers},
    {&T::lateClaims, &S::lateClaims},
    {&T::resent, &S::resent},
    {&T::reportedByGateway, &S::reportedByGateway},
    {&T::errors, &S::errors},
};

}  // namespace

SimulationSummary TrafficCounters::summary() const {
  SimulationSummary s;
  for (const auto& [counter, field] : kCounts) s.*field = (this->*counter).load();
  for (TriggerSource source : allValues<TriggerSource>()) {
    for (Outcome outcome : allValues<Outcome>()) {
      const std::int64_t n = attempts_[index(source, outcome)].load();
      if (n > 0) s.attempts[{source, outcome}] = n;
    }
  }
  for (CarelessHole hole : kCarelessHoles) {
    const std::size_t i = holeIndex(hole);
    if (holesTried_[i].load() > 0) s.holes[hole] = {holesTried_[i].load(), holesRefused_[i].load()};
  }
  return s;
}

}  // namespace idem::sim

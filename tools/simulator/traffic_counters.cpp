#include "traffic_counters.hpp"

namespace idem::sim {

SimulationSummary TrafficCounters::summary() const {
  SimulationSummary s;
  s.operations = operations.load();
  for (TriggerSource source : allValues<TriggerSource>()) {
    for (Outcome outcome : allValues<Outcome>()) {
      const std::int64_t n = attempts_[index(source, outcome)].load();
      if (n > 0) s.attempts[{source, outcome}] = n;
    }
  }
  s.charges = charges.load();
  s.doubleCharges = doubleCharges.load();
  s.responsesLost = responsesLost.load();
  s.crashes = crashes.load();
  s.declines = declines.load();
  s.refusedConnections = refusedConnections.load();
  s.finalFailuresReplayed = finalFailuresReplayed.load();
  s.rereads = rereads.load();
  s.settledSuccess = settledSuccess.load();
  s.settledFailed = settledFailed.load();
  s.settleRefused = settleRefused.load();
  s.reconciled = reconciled.load();
  s.roundsFailed = roundsFailed.load();
  for (CarelessHole hole : kCarelessHoles) {
    const std::size_t i = holeIndex(hole);
    if (holesTried_[i].load() > 0) s.holes[hole] = {holesTried_[i].load(), holesRefused_[i].load()};
  }
  s.unknownResolvedByCallback = unknownResolvedByCallback.load();
  s.errors = errors.load();
  return s;
}

}  // namespace idem::sim

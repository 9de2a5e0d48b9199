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
  s.unknownResolvedByCallback = unknownResolvedByCallback.load();
  s.errors = errors.load();
  return s;
}

}  // namespace idem::sim

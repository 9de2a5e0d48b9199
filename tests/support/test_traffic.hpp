// Simulated traffic against a suite's database: the agents of a small deployment under a seed and
// a run id of the suite's, so that a suite plans the same operations every run. Each suite turns
// on the faults and retries it is about. Header-only: only the suites that link idem_simulator
// include it.
#pragma once

#include <cstdint>
#include <string>

#include "simulator.hpp"
#include "test_database.hpp"

namespace idem::test {

inline sim::SimulationConfig testTraffic(const TestDatabase& db, std::uint64_t seed,
                                         const std::string& runId, std::int64_t operations) {
  sim::SimulationConfig c;
  c.connection.dsn = db.dsn();
  c.connection.source = "test";
  c.agents = 4;
  c.seed = seed;
  c.operations = operations;
  c.runId = runId;
  return c;
}

}  // namespace idem::test

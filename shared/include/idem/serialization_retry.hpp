// A protocol call that ended in a serialization failure (40001) or a deadlock (40P01) changed
// nothing, and runs again in a new transaction, as REPEATABLE READ and SERIALIZABLE ask of every
// client. ProtocolClient and the proxy's sessions both retry this way.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

namespace idem {

inline bool runsAgain(const std::string& sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01";
}

// A growing pause, spread at random, so that the racers that failed together do not collide
// again: 0.5 to 1 ms after the first failure, doubling each time (32 to 64 ms before the last try
// of eight). A longer transaction (a purge among claims) gets its turn within 0.13 s.
inline std::chrono::microseconds pauseBeforeRetry(int attempt) {
  thread_local std::minstd_rand spread(std::random_device{}());
  const int ceiling = 1000 << std::min(attempt - 1, 7);
  return std::chrono::microseconds(
      std::uniform_int_distribution<int>(ceiling / 2, ceiling)(spread));
}

}  // namespace idem

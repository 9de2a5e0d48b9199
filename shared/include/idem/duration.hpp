// Durations as Prometheus writes them ("500ms", "5s", "1m30s", "24h", "7d"), for flags.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace idem {

// Empty on anything that is not a sequence of <integer><unit> with units y w d h m s ms, largest
// first, each at most once (as Prometheus reads them).
std::optional<std::chrono::milliseconds> parseDuration(std::string_view text);

// The Prometheus spelling, days at most: 300000ms -> "5m", 90000ms -> "1m30s", 30 days -> "30d".
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace idem

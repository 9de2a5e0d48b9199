// Durations as Prometheus writes them ("500ms", "5s", "1m30s", "24h", "7d"), for flags.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace idem {

// Empty when the text is not a duration.
std::optional<std::chrono::milliseconds> parseDuration(std::string_view text);

// The shortest Prometheus spelling: 90000ms -> "1m30s", 0 -> "0s".
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace idem

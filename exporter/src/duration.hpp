// Durations in the Prometheus style (5s, 1m30s, 24h, 500ms, 7d), as every Prometheus exporter's
// flags spell them.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace idem::exporter {

// Empty on anything that is not a sequence of <integer><unit> with units y w d h m s ms, largest
// first, each at most once.
std::optional<std::chrono::milliseconds> parseDuration(std::string_view text);

// The shortest Prometheus spelling: 300000ms -> "5m", 90000ms -> "1m30s".
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace idem::exporter

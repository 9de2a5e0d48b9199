#include "idem/duration.hpp"

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <utility>

namespace idem {
namespace {

using Unit = std::pair<std::string_view, std::int64_t>;  // spelling, milliseconds
constexpr std::array<Unit, 7> units{{{"y", 365LL * 24 * 3600 * 1000},
                                     {"w", 7LL * 24 * 3600 * 1000},
                                     {"d", 24LL * 3600 * 1000},
                                     {"h", 3600LL * 1000},
                                     {"m", 60LL * 1000},
                                     {"s", 1000},
                                     {"ms", 1}}};

}  // namespace

std::optional<std::chrono::milliseconds> parseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text == "0") return std::chrono::milliseconds(0);
  std::int64_t total = 0;
  std::size_t nextUnit = 0;  // units must come largest first, each once
  std::size_t i = 0;
  while (i < text.size()) {
    std::int64_t number = 0;
    const std::size_t digitsStart = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (number > std::numeric_limits<std::int64_t>::max() / 10) return std::nullopt;
      number = number * 10 + (text[i] - '0');
      ++i;
    }
    if (i == digitsStart) return std::nullopt;
    const std::size_t unitStart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(unitStart, i - unitStart);
    bool matched = false;
    for (std::size_t u = nextUnit; u < units.size(); ++u) {
      if (units[u].first == unit) {
        if (number > std::numeric_limits<std::int64_t>::max() / units[u].second)
          return std::nullopt;
        total += number * units[u].second;
        nextUnit = u + 1;
        matched = true;
        break;
      }
    }
    if (!matched) return std::nullopt;
  }
  return std::chrono::milliseconds(total);
}

std::string formatDuration(std::chrono::milliseconds d) {
  std::int64_t left = d.count();
  if (left == 0) return "0s";
  std::string out;
  for (const auto& [spelling, ms] : units) {
    // Days are the largest unit written: "30d" reads better than "4w2d".
    if (spelling == "y" || spelling == "w") continue;
    if (left >= ms) {
      out += std::to_string(left / ms) + std::string(spelling);
      left %= ms;
    }
  }
  return out;
}

}  // namespace idem

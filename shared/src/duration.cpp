#include "idem/duration.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace idem {
namespace {

constexpr std::array<std::pair<std::string_view, long long>, 7> kUnits{{
    {"ms", 1},
    {"s", 1000},
    {"m", 60'000},
    {"h", 3'600'000},
    {"d", 86'400'000},
    {"w", 604'800'000},
    {"y", 31'536'000'000},
}};

}  // namespace

std::optional<std::chrono::milliseconds> parseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text == "0") return std::chrono::milliseconds(0);
  long long total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    long long number = 0;
    const std::size_t digitsStart = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
      number = number * 10 + (text[i] - '0');
      if (number > 1'000'000'000'000LL) return std::nullopt;
      ++i;
    }
    if (i == digitsStart) return std::nullopt;
    const std::size_t unitStart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])) != 0) ++i;
    const std::string_view unit = text.substr(unitStart, i - unitStart);
    bool known = false;
    for (const auto& [name, ms] : kUnits) {
      if (unit == name) {
        total += number * ms;
        known = true;
        break;
      }
    }
    if (!known) return std::nullopt;
  }
  return std::chrono::milliseconds(total);
}

std::string formatDuration(std::chrono::milliseconds d) {
  long long ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (it->first == "w" || it->first == "y") continue;  // "8d" reads better than "1w1d"
    if (ms >= it->second) {
      out += std::to_string(ms / it->second) + std::string(it->first);
      ms %= it->second;
    }
  }
  return out;
}

}  // namespace idem

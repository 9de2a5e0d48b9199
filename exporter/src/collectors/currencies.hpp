// The currency label values of the overcharge figures, bounded like the biz types
// (docs/contract/metrics.md): an ISO 4217 code, among the first --max-currencies seen; any other
// value (a code ISO 4217 does not list, or one beyond the bound) is published as "other", so no
// ledger can make a scrape grow without bound.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

namespace idem::exporter {

// Whether `code` is an ISO 4217 currency code (the active list, funds and precious metals
// included).
class Currencies {
 public:
  static constexpr std::string_view kOther = "other";
  explicit Currencies(std::size_t maxCurrencies) : max_(maxCurrencies) {}

  // The label a currency is published under: itself, or "other". Collection thread only.
  std::string labelOf(std::string_view currency);
  // Values published as "other" so far.
  std::size_t overflowed() const { return overflowed_.size(); }

 private:
  std::size_t max_;
  std::set<std::string, std::less<>> kept_;
  std::set<std::string, std::less<>> overflowed_;
};

}  // namespace idem::exporter

#include "collectors/currencies.hpp"

#include "idem/currencies.hpp"

namespace idem::exporter {

std::string Currencies::labelOf(std::string_view currency) {
  if (kept_.contains(currency)) return std::string(currency);
  if (isIso4217(currency) && kept_.size() < max_) {
    kept_.emplace(currency);
    return std::string(currency);
  }
  if (overflowed_.size() < 10'000) overflowed_.emplace(currency);  // only a count is published
  return std::string(kOther);
}

}  // namespace idem::exporter

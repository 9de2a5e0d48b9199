#include "idem/currencies.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <string>

namespace idem {
namespace {

struct Currency {
  std::string_view code;
  int exponent;  // -1: ISO 4217 gives no minor unit
};

// ISO 4217 (list one), the codes in use, sorted, each with its minor-unit exponent.
constexpr std::array<Currency, 180> kIso4217{{
    {"AED", 2},  {"AFN", 2},  {"ALL", 2},  {"AMD", 2},  {"ANG", 2},  {"AOA", 2},  {"ARS", 2},
    {"AUD", 2},  {"AWG", 2},  {"AZN", 2},  {"BAM", 2},  {"BBD", 2},  {"BDT", 2},  {"BGN", 2},
    {"BHD", 3},  {"BIF", 0},  {"BMD", 2},  {"BND", 2},  {"BOB", 2},  {"BOV", 2},  {"BRL", 2},
    {"BSD", 2},  {"BTN", 2},  {"BWP", 2},  {"BYN", 2},  {"BZD", 2},  {"CAD", 2},  {"CDF", 2},
    {"CHE", 2},  {"CHF", 2},  {"CHW", 2},  {"CLF", 4},  {"CLP", 0},  {"CNY", 2},  {"COP", 2},
    {"COU", 2},  {"CRC", 2},  {"CUC", 2},  {"CUP", 2},  {"CVE", 2},  {"CZK", 2},  {"DJF", 0},
    {"DKK", 2},  {"DOP", 2},  {"DZD", 2},  {"EGP", 2},  {"ERN", 2},  {"ETB", 2},  {"EUR", 2},
    {"FJD", 2},  {"FKP", 2},  {"GBP", 2},  {"GEL", 2},  {"GHS", 2},  {"GIP", 2},  {"GMD", 2},
    {"GNF", 0},  {"GTQ", 2},  {"GYD", 2},  {"HKD", 2},  {"HNL", 2},  {"HTG", 2},  {"HUF", 2},
    {"IDR", 2},  {"ILS", 2},  {"INR", 2},  {"IQD", 3},  {"IRR", 2},  {"ISK", 0},  {"JMD", 2},
    {"JOD", 3},  {"JPY", 0},  {"KES", 2},  {"KGS", 2},  {"KHR", 2},  {"KMF", 0},  {"KPW", 2},
    {"KRW", 0},  {"KWD", 3},  {"KYD", 2},  {"KZT", 2},  {"LAK", 2},  {"LBP", 2},  {"LKR", 2},
    {"LRD", 2},  {"LSL", 2},  {"LYD", 3},  {"MAD", 2},  {"MDL", 2},  {"MGA", 2},  {"MKD", 2},
    {"MMK", 2},  {"MNT", 2},  {"MOP", 2},  {"MRU", 2},  {"MUR", 2},  {"MVR", 2},  {"MWK", 2},
    {"MXN", 2},  {"MXV", 2},  {"MYR", 2},  {"MZN", 2},  {"NAD", 2},  {"NGN", 2},  {"NIO", 2},
    {"NOK", 2},  {"NPR", 2},  {"NZD", 2},  {"OMR", 3},  {"PAB", 2},  {"PEN", 2},  {"PGK", 2},
    {"PHP", 2},  {"PKR", 2},  {"PLN", 2},  {"PYG", 0},  {"QAR", 2},  {"RON", 2},  {"RSD", 2},
    {"RUB", 2},  {"RWF", 0},  {"SAR", 2},  {"SBD", 2},  {"SCR", 2},  {"SDG", 2},  {"SEK", 2},
    {"SGD", 2},  {"SHP", 2},  {"SLE", 2},  {"SLL", 2},  {"SOS", 2},  {"SRD", 2},  {"SSP", 2},
    {"STN", 2},  {"SVC", 2},  {"SYP", 2},  {"SZL", 2},  {"THB", 2},  {"TJS", 2},  {"TMT", 2},
    {"TND", 3},  {"TOP", 2},  {"TRY", 2},  {"TTD", 2},  {"TWD", 2},  {"TZS", 2},  {"UAH", 2},
    {"UGX", 0},  {"USD", 2},  {"USN", 2},  {"UYI", 0},  {"UYU", 2},  {"UYW", 4},  {"UZS", 2},
    {"VED", 2},  {"VES", 2},  {"VND", 0},  {"VUV", 0},  {"WST", 2},  {"XAF", 0},  {"XAG", -1},
    {"XAU", -1}, {"XBA", -1}, {"XBB", -1}, {"XBC", -1}, {"XBD", -1}, {"XCD", 2},  {"XDR", -1},
    {"XOF", 0},  {"XPD", -1}, {"XPF", 0},  {"XPT", -1}, {"XSU", -1}, {"XTS", -1}, {"XUA", -1},
    {"XXX", -1}, {"YER", 2},  {"ZAR", 2},  {"ZMW", 2},  {"ZWL", 2},
}};

constexpr bool sortedByCode() {
  for (std::size_t i = 1; i < kIso4217.size(); ++i) {
    if (!(kIso4217[i - 1].code < kIso4217[i].code)) return false;
  }
  return true;
}
static_assert(sortedByCode(), "kIso4217 must stay sorted by code, each code once");

const Currency* find(std::string_view code) {
  const auto it =
      std::lower_bound(kIso4217.begin(), kIso4217.end(), code,
                       [](const Currency& c, std::string_view k) { return c.code < k; });
  return it != kIso4217.end() && it->code == code ? &*it : nullptr;
}

[[noreturn]] void refuse(std::string_view amount, std::string_view currency,
                         const std::string& why) {
  throw std::invalid_argument("amount '" + std::string(amount.substr(0, 40)) + "' " +
                              std::string(currency.substr(0, 8)) + ": " + why);
}

}  // namespace

bool isIso4217(std::string_view code) {
  return find(code) != nullptr;
}

std::optional<int> minorUnitExponent(std::string_view code) {
  const Currency* c = find(code);
  if (c == nullptr || c->exponent < 0) return std::nullopt;
  return c->exponent;
}

std::int64_t parseMinorUnits(std::string_view amount, std::string_view currency) {
  const Currency* c = find(currency);
  if (c == nullptr) refuse(amount, currency, "not an ISO 4217 currency code");
  if (c->exponent < 0) refuse(amount, currency, "the currency has no minor unit");
  std::string_view text = amount;
  const bool negative = !text.empty() && text.front() == '-';
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  const std::size_t point = text.find('.');
  const std::string_view whole = text.substr(0, point);
  const std::string_view fraction =
      point == std::string_view::npos ? std::string_view() : text.substr(point + 1);
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  if (whole.empty() || !digits(whole) || !digits(fraction) ||
      (point != std::string_view::npos && fraction.empty())) {
    refuse(amount, currency, "not a decimal number (digits, an optional sign and point)");
  }
  if (fraction.size() > static_cast<std::size_t>(c->exponent)) {
    refuse(amount, currency,
           "more decimals than the currency's " + std::to_string(c->exponent) + " minor digits");
  }
  // Accumulated as a negative number, which reaches the 64-bit minimum too.
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  std::int64_t value = 0;
  const auto push = [&](int digit) {
    if (value < (kMin + digit) / 10) refuse(amount, currency, "outside the ledger's 64-bit range");
    value = value * 10 - digit;
  };
  for (char ch : whole) push(ch - '0');
  for (char ch : fraction) push(ch - '0');
  for (std::size_t i = fraction.size(); i < static_cast<std::size_t>(c->exponent); ++i) push(0);
  if (!negative) {
    if (value == kMin) refuse(amount, currency, "outside the ledger's 64-bit range");
    return -value;
  }
  return value;
}

}  // namespace idem

// ISO 4217 once: which codes exist and how many minor-unit digits each has (JPY 0, USD and CNY 2,
// KWD 3, CLF 4), for the exporter's currency labels, the admin app's money text, and amounts that
// arrive in major units (a gateway's statement: "29.90"), which become the ledger's minor units
// without floating point.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace idem {

// A code in use (funds codes, precious metals and the testing codes included).
bool isIso4217(std::string_view code);

// The minor-unit exponent ISO 4217 gives the code; none for a code it does not list, or one it
// lists without minor units (gold XAU, the SDR XDR, XXX).
std::optional<int> minorUnitExponent(std::string_view code);

// "29.90" CNY -> 2990, "-5" JPY -> -5, "1.5" KWD -> 1500: a sign, digits, at most one point and at
// most the currency's exponent of digits after it (trailing zeros beyond it are refused too: the
// text is not what the currency can carry). Throws std::invalid_argument naming the problem: not a
// number, too many decimals for the currency, an unknown currency or one without minor units, or
// a value outside the ledger's 64-bit range.
std::int64_t parseMinorUnits(std::string_view amount, std::string_view currency);

}  // namespace idem

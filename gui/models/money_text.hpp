// Amounts in minor units (the ledger's amount_minor) as money: 2990 CNY reads "29.90 CNY".
#pragma once

#include <QString>
#include <cstdint>
#include <string>

namespace idem::admin {

// ISO 4217 minor-unit exponent (idem/currencies.hpp): 0 for JPY, 3 for KWD; 2 for a code it does
// not list or gives no minor unit.
int minorUnitDigits(const std::string& currency);
QString moneyText(std::int64_t amountMinor, const std::string& currency);

}  // namespace idem::admin

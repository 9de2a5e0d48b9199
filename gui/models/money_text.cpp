#include "models/money_text.hpp"

#include "idem/currencies.hpp"

namespace idem::admin {

int minorUnitDigits(const std::string& currency) {
  return minorUnitExponent(currency).value_or(2);
}

QString moneyText(std::int64_t amountMinor, const std::string& currency) {
  const int digits = minorUnitDigits(currency);
  const QString code = QString::fromStdString(currency);
  if (digits == 0) return QStringLiteral("%1 %2").arg(amountMinor).arg(code);
  std::int64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  const bool negative = amountMinor < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(amountMinor)
                                           : static_cast<std::uint64_t>(amountMinor);
  const auto uscale = static_cast<std::uint64_t>(scale);
  return QStringLiteral("%1%2.%3 %4")
      .arg(negative ? QStringLiteral("-") : QString())
      .arg(magnitude / uscale)
      .arg(magnitude % uscale, digits, 10, QLatin1Char('0'))
      .arg(code);
}

}  // namespace idem::admin

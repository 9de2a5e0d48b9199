#include "models/age_text.hpp"

namespace idem::admin {

QString ageText(std::chrono::microseconds age) {
  const qint64 s =
      std::max<qint64>(0, std::chrono::duration_cast<std::chrono::seconds>(age).count());
  constexpr qint64 kMinute = 60;
  constexpr qint64 kHour = 60 * kMinute;
  constexpr qint64 kDay = 24 * kHour;
  if (s < kMinute) return QStringLiteral("%1 s").arg(s);
  if (s < kHour) return QStringLiteral("%1 min").arg(s / kMinute);
  if (s < kDay) {
    const qint64 minutes = (s % kHour) / kMinute;
    return minutes == 0 ? QStringLiteral("%1 h").arg(s / kHour)
                        : QStringLiteral("%1 h %2 min").arg(s / kHour).arg(minutes);
  }
  const qint64 hours = (s % kDay) / kHour;
  return hours == 0 ? QStringLiteral("%1 d").arg(s / kDay)
                    : QStringLiteral("%1 d %2 h").arg(s / kDay).arg(hours);
}

}  // namespace idem::admin

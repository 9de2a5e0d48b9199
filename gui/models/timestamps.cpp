#include "models/timestamps.hpp"

#include <QTimeZone>
#include <chrono>

namespace idem::admin {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

QDateTime toDateTime(Timestamp t) {
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  return QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc());
}

Timestamp fromDateTime(const QDateTime& t) {
  return Timestamp(duration_cast<microseconds>(milliseconds(t.toMSecsSinceEpoch())));
}

QString displayTime(Timestamp t) {
  return toDateTime(t).toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
}

QString isoTime(Timestamp t) {
  const auto us = t.time_since_epoch().count();
  // Floor division, so instants before 1970 keep a positive fraction.
  const qint64 seconds = us >= 0 ? us / 1'000'000 : -((-us + 999'999) / 1'000'000);
  const qint64 fraction = us - seconds * 1'000'000;
  const QDateTime whole = QDateTime::fromSecsSinceEpoch(seconds, QTimeZone::utc());
  return whole.toString(QStringLiteral("yyyy-MM-ddTHH:mm:ss")) +
         QStringLiteral(".%1Z").arg(fraction, 6, 10, QLatin1Char('0'));
}

Timestamp localNow() {
  return std::chrono::time_point_cast<microseconds>(std::chrono::system_clock::now());
}

}  // namespace idem::admin

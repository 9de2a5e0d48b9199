#include "models/filter_summary.hpp"

#include <QStringList>

#include "idem/duration.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

QString filterSummary(const RecordFilter& filter) {
  QStringList parts;
  if (filter.stuckOnly) parts << QStringLiteral("stuck");
  if (!filter.statuses.empty()) {
    QStringList statuses;
    for (RecordStatus s : filter.statuses) statuses << fromUtf8(format(s));
    parts << statuses.join(QLatin1Char('/'));
  }
  if (!filter.bizType.empty()) parts << fromUtf8(filter.bizType);
  if (!filter.key.empty()) parts << QStringLiteral("key %1").arg(fromUtf8(filter.key));
  if (!filter.bizIdPrefix.empty()) {
    parts << QStringLiteral("biz id %1*").arg(fromUtf8(filter.bizIdPrefix));
  }
  if (filter.within) {
    parts << QStringLiteral("last %1").arg(QString::fromStdString(idem::formatDuration(
        std::chrono::duration_cast<std::chrono::milliseconds>(*filter.within))));
  }
  if (filter.from || filter.to) {
    parts << QStringLiteral("%1 to %2")
                 .arg(filter.from ? displayTime(*filter.from) : QStringLiteral("\u2026"),
                      filter.to ? displayTime(*filter.to) : QStringLiteral("now"));
  }
  return parts.join(QStringLiteral(" \u00B7 "));
}

}  // namespace idem::admin

#include "models/status_palette.hpp"

#include <QString>

namespace idem::admin {

QColor statusBackground(RecordStatus status) {
  switch (status) {
    case RecordStatus::Processing: return QColor(0xFF, 0xE3, 0xA3);
    case RecordStatus::Unknown: return QColor(0xFF, 0xC4, 0xB0);
    case RecordStatus::Success: return QColor(0xD3, 0xEE, 0xD3);
    case RecordStatus::Failed: return QColor(0xE2, 0xE2, 0xE2);
  }
  return {};
}

QColor statusForeground(RecordStatus status) {
  switch (status) {
    case RecordStatus::Processing: return QColor(0x7A, 0x4E, 0x00);
    case RecordStatus::Unknown: return QColor(0xA3, 0x25, 0x00);
    case RecordStatus::Success: return QColor(0x1B, 0x5E, 0x20);
    case RecordStatus::Failed: return QColor(0x4A, 0x4A, 0x4A);
  }
  return {};
}

QString statusBadgeHtml(RecordStatus status) {
  return QStringLiteral("<span style=\"background-color:%1; color:%2; font-weight:600;\">&nbsp;%3&nbsp;</span>")
      .arg(statusBackground(status).name(), statusForeground(status).name(),
           QString::fromUtf8(format(status).data(), static_cast<qsizetype>(format(status).size())));
}

QColor duplicateFlowBackground() { return QColor(0xFF, 0xC9, 0xC9); }

}  // namespace idem::admin

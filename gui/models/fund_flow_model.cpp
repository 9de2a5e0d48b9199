#include "models/fund_flow_model.hpp"

#include <QBrush>
#include <QFont>
#include <algorithm>

#include "models/money_text.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

void FundFlowModel::setMarkingMoneyMovement(bool on) {
  if (markingMoneyMovement_ == on) return;
  markingMoneyMovement_ = on;
  if (!rows_.empty()) {
    emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1),
                     {Qt::ForegroundRole, Qt::FontRole, Qt::ToolTipRole});
  }
}

int FundFlowModel::duplicateCount() const {
  return static_cast<int>(
      std::count_if(rows_.begin(), rows_.end(), [](const FundFlow& f) { return f.isDuplicate(); }));
}

QVariant FundFlowModel::cellData(const FundFlow& f, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      switch (column) {
        case When:
          return displayTime(f.createdAt);
        case Kind:
          return fromUtf8(format(f.kind));
        case Amount:
          return moneyText(f.amountMinor, f.currency);
        case ExternalRef:
          return fromUtf8(f.externalRef);
        case Key:
          return f.idempotencyKey ? fromUtf8(*f.idempotencyKey) : QString();
        case DuplicateOf:
          return f.duplicateOf ? QStringLiteral("#%1").arg(*f.duplicateOf) : QString();
        case Id:
          return QStringLiteral("#%1").arg(f.id);
        default:
          return {};
      }
    case ExportRole:
      switch (column) {
        case When:
          return isoTime(f.createdAt);
        case Amount:
          return static_cast<qlonglong>(f.amountMinor);
        case DuplicateOf:
          return f.duplicateOf ? QVariant(static_cast<qlonglong>(*f.duplicateOf))
                               : QVariant(QString());
        case Id:
          return static_cast<qlonglong>(f.id);
        default:
          return cellData(f, column, Qt::DisplayRole);
      }
    case Qt::ToolTipRole:
      if (f.isDuplicate()) {
        return QStringLiteral(
                   "Duplicate of flow #%1: a second %2 for %3/%4 under another gateway "
                   "reference (a double charge if it is a DEBIT)")
            .arg(*f.duplicateOf)
            .arg(fromUtf8(format(f.kind)), fromUtf8(f.bizType), fromUtf8(f.bizId));
      }
      if (markingMoneyMovement_ && column == Kind) {
        switch (f.role) {
          case SideEffectRole::Effect:
            return QStringLiteral("counts: proves the %1's side effect").arg(fromUtf8(f.bizType));
          case SideEffectRole::Reversal:
            return QStringLiteral("counts: gives the %1's side effect back")
                .arg(fromUtf8(f.bizType));
          case SideEffectRole::None:
            return QStringLiteral(
                       "does not count for the %1's side effect: a hold, or a kind "
                       "its business type does not count")
                .arg(fromUtf8(f.bizType));
        }
      }
      if (column == When) return isoTime(f.createdAt);
      return {};
    case Qt::ForegroundRole:
      if (markingMoneyMovement_ && f.role == SideEffectRole::None) {
        return QBrush(QColor(0x8A, 0x8A, 0x8A));
      }
      return {};
    case Qt::BackgroundRole:
      if (f.isDuplicate()) return QBrush(duplicateFlowBackground());
      return {};
    case Qt::FontRole:
      if ((f.isDuplicate() && (column == Kind || column == DuplicateOf)) ||
          (markingMoneyMovement_ && column == Kind && f.role != SideEffectRole::None)) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Amount) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case IsDuplicateRole:
      return f.isDuplicate();
    case KindRole:
      return static_cast<int>(f.kind);
    case MovesMoneyRole:
      return f.role != SideEffectRole::None;
    default:
      return {};
  }
}

}  // namespace idem::admin

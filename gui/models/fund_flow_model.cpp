#include "models/fund_flow_model.hpp"

#include <QBrush>
#include <QFont>
#include <algorithm>

#include "models/money_text.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

MoneyMovement moneyMovementOf(FundFlowKind kind) {
  switch (kind) {
    case FundFlowKind::Debit:
    case FundFlowKind::Capture:
      return MoneyMovement::Charge;
    case FundFlowKind::Refund:
      return MoneyMovement::Refund;
    case FundFlowKind::Credit:
    case FundFlowKind::Freeze:
    case FundFlowKind::Unfreeze:
      return MoneyMovement::None;
  }
  return MoneyMovement::None;
}

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
        switch (moneyMovementOf(f.kind)) {
          case MoneyMovement::Charge:
            return QStringLiteral("counts: money taken from the customer");
          case MoneyMovement::Refund:
            return QStringLiteral("counts: money given back, offsets charges");
          case MoneyMovement::None:
            return QStringLiteral("does not count for \"money moved\": a hold or a credit");
        }
      }
      if (column == When) return isoTime(f.createdAt);
      return {};
    case Qt::ForegroundRole:
      if (markingMoneyMovement_ && moneyMovementOf(f.kind) == MoneyMovement::None) {
        return QBrush(QColor(0x8A, 0x8A, 0x8A));
      }
      return {};
    case Qt::BackgroundRole:
      if (f.isDuplicate()) return QBrush(duplicateFlowBackground());
      return {};
    case Qt::FontRole:
      if ((f.isDuplicate() && (column == Kind || column == DuplicateOf)) ||
          (markingMoneyMovement_ && column == Kind &&
           moneyMovementOf(f.kind) != MoneyMovement::None)) {
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
      return moneyMovementOf(f.kind) != MoneyMovement::None;
    default:
      return {};
  }
}

}  // namespace idem::admin

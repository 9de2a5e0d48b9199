#include "models/attempt_model.hpp"

#include <QBrush>
#include <QColor>

#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

QVariant AttemptModel::cellData(const Attempt& a, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      switch (column) {
        case When:
          return displayTime(a.createdAt);
        case Source:
          return fromUtf8(format(a.triggerSource));
        case Outcome:
          return fromUtf8(format(a.outcome));
        case Agent:
          return a.agentId ? fromUtf8(*a.agentId) : QString();
        case Trace:
          return a.traceId ? fromUtf8(*a.traceId) : QString();
        case RequestHash:
          return fromUtf8(a.requestHash).left(12);
        default:
          return {};
      }
    case ExportRole:
      if (column == When) return isoTime(a.createdAt);
      if (column == RequestHash) return fromUtf8(a.requestHash);
      return cellData(a, column, Qt::DisplayRole);
    case Qt::ToolTipRole:
      if (column == When) return isoTime(a.createdAt);
      if (column == RequestHash) return fromUtf8(a.requestHash);
      if (column == Outcome) return outcomeMeaning(a.outcome);
      return {};
    case Qt::ForegroundRole:
      // The answers that mean "something is off" (a changed request, a second key for one
      // object) and a retired key stand out; status_palette says which.
      if (column == Outcome) {
        const QColor colour = outcomeForeground(a.outcome);
        if (colour.isValid()) return QBrush(colour);
      }
      return {};
    case OutcomeRole:
      return static_cast<int>(a.outcome);
    default:
      return {};
  }
}

}  // namespace idem::admin

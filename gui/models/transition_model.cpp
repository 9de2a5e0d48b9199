#include "models/transition_model.hpp"

#include <QBrush>
#include <QFont>

#include "models/gateway_evidence_text.hpp"
#include "models/json_text.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

QVariant TransitionModel::cellData(const Transition& t, int column, int role) const {
  const bool byOperator = t.actorKind == idem::ActorKind::Operator;
  switch (role) {
    case Qt::DisplayRole:
      switch (column) {
        case When:
          return displayTime(t.createdAt);
        case From:
          return t.fromStatus ? fromUtf8(format(*t.fromStatus)) : QStringLiteral("(created)");
        case To:
          return fromUtf8(format(t.toStatus));
        case Version:
          return t.version;
        case Actor:
          return fromUtf8(t.actor);
        case ActorKind:
          return fromUtf8(format(t.actorKind));
        case Reason:
          return t.reason ? fromUtf8(*t.reason) : QString();
        case Evidence: {
          // The gateway's word reads as a sentence; anything else as its JSON.
          const QString sentence = gatewayEvidenceSentence(t);
          return sentence.isEmpty() ? compactJson(t.evidence) : sentence;
        }
        default:
          return {};
      }
    case ExportRole:
      if (column == When) return isoTime(t.createdAt);
      if (column == Evidence) return t.evidence ? fromUtf8(*t.evidence) : QString();
      return cellData(t, column, Qt::DisplayRole);
    case Qt::ToolTipRole:
      if (column == When) return isoTime(t.createdAt);
      if (column == Evidence) {
        const QString sentence = gatewayEvidenceSentence(t);
        return sentence.isEmpty() ? prettyJson(t.evidence)
                                  : sentence + QStringLiteral("\n\n") + prettyJson(t.evidence);
      }
      if (column == Reason && t.reason) return fromUtf8(*t.reason);
      if (column == ActorKind || column == Actor) return actorKindMeaning(t.actorKind);
      return {};
    case Qt::BackgroundRole:
      if (column == To) return QBrush(statusBackground(t.toStatus));
      if (column == From && t.fromStatus) return QBrush(statusBackground(*t.fromStatus));
      return {};
    case Qt::ForegroundRole:
      if (column == To) return QBrush(statusForeground(t.toStatus));
      if (column == From && t.fromStatus) return QBrush(statusForeground(*t.fromStatus));
      if (column == Actor || column == ActorKind) {
        const QColor colour = actorKindForeground(t.actorKind);
        if (colour.isValid()) return QBrush(colour);
      }
      return {};
    case Qt::FontRole:
      // A decision (a person's, or the reconciler's from evidence) reads apart from the
      // protocol's own changes; a person's is bold.
      if ((column == Actor || column == ActorKind) && t.actorKind != idem::ActorKind::System) {
        QFont font;
        font.setBold(byOperator);
        font.setItalic(t.actorKind == idem::ActorKind::Reconciler);
        return font;
      }
      return {};
    case ToStatusRole:
      return static_cast<int>(t.toStatus);
    case IsOperatorRole:
      return byOperator;
    case ActorKindRole:
      return static_cast<int>(t.actorKind);
    default:
      return {};
  }
}

}  // namespace idem::admin

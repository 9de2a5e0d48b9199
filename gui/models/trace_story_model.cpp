#include "models/trace_story_model.hpp"

#include <QBrush>
#include <QFont>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "models/money_text.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// $1 the trace, $2 the agent: exactly one is bound, the other NULL.
constexpr const char* kTraceStory =
    "SELECT " IDEM_SQL_STORY_COLUMNS " FROM idem.trace_story($1, $2)";

// A vocabulary value as the database spells it; nothing where the column is NULL.
template <typename E>
QString text(const std::optional<E>& value) {
  return value ? fromUtf8(format(*value)) : QString();
}

}  // namespace

std::vector<StoryEvent> readTraceStory(pqxx::connection& c, const StoryQuery& query) {
  return idem::translatingErrors("read the story", [&] {
    std::vector<StoryEvent> events;
    pqxx::read_transaction tx(c);
    const std::optional<std::string> trace =
        query.subject == StorySubject::Trace ? std::optional(query.id) : std::nullopt;
    const std::optional<std::string> agent =
        query.subject == StorySubject::Agent ? std::optional(query.id) : std::nullopt;
    for (const pqxx::row& row : tx.exec_params(kTraceStory, trace, agent)) {
      events.push_back(storyEventFromRow(row));
    }
    tx.commit();
    return events;
  });
}

QVariant TraceStoryModel::display(const StoryEvent& e, int column) const {
  switch (column) {
    case When:
      return displayTime(e.at);
    case Event:
      return fromUtf8(eventTable(e.kind));
    case Key:
      return fromUtf8(e.key);
    case Source:
      return text(e.source);
    case Outcome:
      return text(e.outcome);
    case FromTo:
      if (!e.toStatus) return QString();
      return QStringLiteral("%1 \u2192 %2")
          .arg(e.fromStatus ? text(e.fromStatus) : QStringLiteral("(new)"), text(e.toStatus));
    case Actor:
      if (e.actor.empty()) return QString();
      return e.actorKind ? QStringLiteral("%1 (%2)").arg(fromUtf8(e.actor), text(e.actorKind))
                         : fromUtf8(e.actor);
    case Flow:
      if (!e.flowKind) return QString();
      return e.amountMinor ? QStringLiteral("%1 %2").arg(text(e.flowKind),
                                                         moneyText(*e.amountMinor, e.currency))
                           : text(e.flowKind);
    case Reason:
      return fromUtf8(e.reason);
    case Agent:
      return fromUtf8(e.agentId);
    case Trace:
      return fromUtf8(e.traceId);
    default:
      return {};
  }
}

QVariant TraceStoryModel::cellData(const StoryEvent& e, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(e, column);
    case ExportRole:
      if (column == When) return isoTime(e.at);
      return display(e, column);
    case Qt::ToolTipRole:
      if (column == When) return isoTime(e.at);
      if (column == Outcome && e.outcome) return outcomeMeaning(*e.outcome);
      if (column == Flow && !e.externalRef.empty()) {
        return QStringLiteral("gateway ref %1").arg(fromUtf8(e.externalRef));
      }
      return {};
    case Qt::ForegroundRole:
      if (column == Outcome && e.outcome) {
        const QColor colour = outcomeForeground(*e.outcome);
        if (colour.isValid()) return QBrush(colour);
      }
      if (column == FromTo && e.toStatus) return QBrush(statusForeground(*e.toStatus));
      return {};
    case Qt::FontRole:
      if (e.kind != StoryEventKind::Attempt && column == Event) {
        QFont font;
        font.setBold(e.kind == StoryEventKind::FundFlow);
        font.setItalic(e.kind != StoryEventKind::FundFlow);  // a transition, a lease expiry too
        return font;
      }
      return {};
    case EventRole:
      return fromUtf8(eventTable(e.kind));
    case BizTypeRole:
      return fromUtf8(e.bizType);
    case BizIdRole:
      return fromUtf8(e.bizId);
    default:
      return {};
  }
}

}  // namespace idem::admin

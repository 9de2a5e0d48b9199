#include "models/trace_story_model.hpp"

#include <QBrush>
#include <QFont>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "models/column_titles.hpp"
#include "models/money_text.hpp"
#include "models/sql_row.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// $1 the trace, $2 the agent: exactly one is bound, the other NULL.
constexpr const char* kTraceStory =
    "SELECT " IDEM_SQL_MICROS(
        "at") ", event, event_id, idempotency_key, biz_type, biz_id, trigger_source, outcome, "
              "from_status, to_status, actor, actor_kind, reason, flow_kind, amount_minor, "
              "currency, external_ref, agent_id, trace_id FROM idem.trace_story($1, $2)";

QString text(const std::optional<std::string>& s) {
  return s ? fromUtf8(*s) : QString();
}

}  // namespace

std::vector<AuditEvent> readTraceStory(pqxx::connection& c, const StoryQuery& query) {
  return idem::translatingErrors("read the story", [&] {
    std::vector<AuditEvent> events;
    pqxx::read_transaction tx(c);
    const std::optional<std::string> trace =
        query.subject == StorySubject::Trace ? std::optional(query.id) : std::nullopt;
    const std::optional<std::string> agent =
        query.subject == StorySubject::Agent ? std::optional(query.id) : std::nullopt;
    for (const pqxx::row& f : tx.exec_params(kTraceStory, trace, agent)) {
      AuditEvent e;
      e.at = micros(f[0]);
      e.event = f[1].c_str();
      e.eventId = f[2].as<std::int64_t>();
      e.idempotencyKey = optionalText(f[3]);
      e.bizType = optionalText(f[4]);
      e.bizId = optionalText(f[5]);
      e.triggerSource = optionalText(f[6]);
      e.outcome = optionalText(f[7]);
      e.fromStatus = optionalText(f[8]);
      e.toStatus = optionalText(f[9]);
      e.actor = optionalText(f[10]);
      e.actorKind = optionalText(f[11]);
      e.reason = optionalText(f[12]);
      e.flowKind = optionalText(f[13]);
      if (!f[14].is_null()) e.amountMinor = f[14].as<std::int64_t>();
      e.currency = optionalText(f[15]);
      e.externalRef = optionalText(f[16]);
      e.agentId = optionalText(f[17]);
      e.traceId = optionalText(f[18]);
      events.push_back(std::move(e));
    }
    tx.commit();
    return events;
  });
}

int TraceStoryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant TraceStoryModel::display(const AuditEvent& e, int column) const {
  switch (column) {
    case When:
      return displayTime(e.at);
    case Event:
      return fromUtf8(e.event);
    case Key:
      return text(e.idempotencyKey);
    case Source:
      return text(e.triggerSource);
    case Outcome:
      return text(e.outcome);
    case FromTo:
      if (!e.toStatus) return QString();
      return QStringLiteral("%1 \u2192 %2")
          .arg(e.fromStatus ? fromUtf8(*e.fromStatus) : QStringLiteral("(new)"),
               fromUtf8(*e.toStatus));
    case Actor:
      if (!e.actor) return QString();
      return e.actorKind ? QStringLiteral("%1 (%2)").arg(fromUtf8(*e.actor), fromUtf8(*e.actorKind))
                         : fromUtf8(*e.actor);
    case Flow:
      if (!e.flowKind) return QString();
      return e.amountMinor ? QStringLiteral("%1 %2").arg(
                                 fromUtf8(*e.flowKind),
                                 moneyText(*e.amountMinor, e.currency.value_or(std::string())))
                           : fromUtf8(*e.flowKind);
    case Reason:
      return text(e.reason);
    case Agent:
      return text(e.agentId);
    case Trace:
      return text(e.traceId);
    default:
      return {};
  }
}

QVariant TraceStoryModel::cellData(const AuditEvent& e, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(e, column);
    case ExportRole:
      if (column == When) return isoTime(e.at);
      return display(e, column);
    case Qt::ToolTipRole:
      if (column == When) return isoTime(e.at);
      if (column == Outcome && e.outcome) {
        if (const auto o = tryParse<idem::Outcome>(*e.outcome)) return outcomeMeaning(*o);
      }
      if (column == Flow && e.externalRef) {
        return QStringLiteral("gateway ref %1").arg(fromUtf8(*e.externalRef));
      }
      return {};
    case Qt::ForegroundRole:
      if (column == Outcome && e.outcome) {
        if (const auto o = tryParse<idem::Outcome>(*e.outcome)) {
          const QColor colour = outcomeForeground(*o);
          if (colour.isValid()) return QBrush(colour);
        }
      }
      if (column == FromTo && e.toStatus) {
        if (const auto s = tryParse<RecordStatus>(*e.toStatus)) return QBrush(statusForeground(*s));
      }
      return {};
    case Qt::FontRole:
      if (column == Event && e.event != "attempt") {
        QFont bold;
        bold.setBold(e.event == "fund_flow");
        bold.setItalic(e.event == "transition");
        return bold;
      }
      return {};
    case EventRole:
      return fromUtf8(e.event);
    case BizTypeRole:
      return text(e.bizType);
    case BizIdRole:
      return text(e.bizId);
    default:
      return {};
  }
}

QVariant TraceStoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  static constexpr auto kTitles =
      columnTitles("When", "Event", "Idempotency key", "Source", "Outcome", "From \u2192 to",
                   "Actor", "Flow", "Reason", "Agent", "Trace");
  static_assert(kTitles.size() == ColumnCount);
  return columnTitle(kTitles, section, orientation, role);
}

}  // namespace idem::admin

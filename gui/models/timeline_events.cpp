#include "models/timeline_events.hpp"

#include <QStringList>
#include <algorithm>
#include <array>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "models/money_text.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

using std::chrono::microseconds;

// Its rows are idem.story_event's (story_event.hpp).
constexpr const char* kStory =
    "SELECT " IDEM_SQL_STORY_COLUMNS " FROM idem.business_object_story($1, $2, $3)";

constexpr std::array<microseconds, 25> kSteps{{
    microseconds(1'000),      microseconds(2'000),      microseconds(5'000),
    microseconds(10'000),     microseconds(20'000),     microseconds(50'000),
    microseconds(100'000),    microseconds(200'000),    microseconds(500'000),
    std::chrono::seconds(1),  std::chrono::seconds(2),  std::chrono::seconds(5),
    std::chrono::seconds(10), std::chrono::seconds(15), std::chrono::seconds(30),
    std::chrono::minutes(1),  std::chrono::minutes(2),  std::chrono::minutes(5),
    std::chrono::minutes(10), std::chrono::minutes(15), std::chrono::minutes(30),
    std::chrono::hours(1),    std::chrono::hours(2),    std::chrono::hours(6),
    std::chrono::hours(24),
}};

QString kindName(StoryEventKind kind) {
  switch (kind) {
    case StoryEventKind::Attempt:
      return QStringLiteral("attempt");
    case StoryEventKind::Transition:
      return QStringLiteral("transition");
    case StoryEventKind::FundFlow:
      return QStringLiteral("fund flow");
    case StoryEventKind::LeaseExpiry:
      return QStringLiteral("lease expiry");
  }
  return {};
}

}  // namespace

BusinessObjectStory readBusinessObjectStory(pqxx::connection& c, const std::string& bizType,
                                            const std::string& bizId, int limit) {
  return idem::translatingErrors("read the business object's story", [&] {
    BusinessObjectStory story;
    story.bizType = bizType;
    story.bizId = bizId;
    pqxx::nontransaction tx(c);
    // One row more than shown tells whether the limit cut the story.
    const pqxx::result rows = tx.exec_params(kStory, bizType, bizId, limit + 1);
    story.events.reserve(rows.size());
    for (const pqxx::row& row : rows) story.events.push_back(storyEventFromRow(row));
    story.truncated = static_cast<int>(story.events.size()) > limit;
    if (story.truncated) story.events.resize(static_cast<std::size_t>(limit));
    return story;
  });
}

QString eventLabel(const StoryEvent& e) {
  switch (e.kind) {
    case StoryEventKind::Attempt: {
      QString label = e.source && *e.source != TriggerSource::Initial
                          ? QStringLiteral("%1 retry").arg(fromUtf8(format(*e.source)))
                          : QStringLiteral("first try");
      if (e.outcome && *e.outcome != Outcome::Executed) {
        label += QStringLiteral(": %1").arg(fromUtf8(format(*e.outcome)));
      }
      return label;
    }
    case StoryEventKind::Transition: {
      QString label = QStringLiteral("\u2192 %1")
                          .arg(e.toStatus ? fromUtf8(format(*e.toStatus)) : QStringLiteral("?"));
      if (e.actorKind && *e.actorKind != ActorKind::System) {
        label += QStringLiteral(" by %1").arg(fromUtf8(e.actor));
      }
      return label;
    }
    case StoryEventKind::LeaseExpiry:
      return QStringLiteral("lease expired");
    case StoryEventKind::FundFlow:
      return QStringLiteral("%1 %2").arg(
          e.flowKind ? fromUtf8(format(*e.flowKind)) : QStringLiteral("?"),
          e.amountMinor ? moneyText(*e.amountMinor, e.currency) : QString());
  }
  return {};
}

QString eventDetail(const StoryEvent& e) {
  QStringList lines;
  lines << QStringLiteral("%1 #%2 at %3").arg(kindName(e.kind)).arg(e.eventId).arg(isoTime(e.at));
  const auto add = [&lines](const char* name, const QString& value) {
    if (!value.isEmpty()) lines << QStringLiteral("%1: %2").arg(QLatin1String(name), value);
  };
  add("key", fromUtf8(e.key));
  add("business object", fromUtf8(e.bizType + "/" + e.bizId));
  if (e.source) add("trigger source", fromUtf8(format(*e.source)));
  if (e.outcome)
    add("outcome", fromUtf8(format(*e.outcome)) + QStringLiteral(" (") +
                       outcomeMeaning(*e.outcome) + QStringLiteral(")"));
  if (e.toStatus) {
    add("status", (e.fromStatus ? fromUtf8(format(*e.fromStatus)) : QStringLiteral("(created)")) +
                      QStringLiteral(" \u2192 ") + fromUtf8(format(*e.toStatus)));
  }
  if (e.actorKind) add("actor", fromUtf8(e.actor + " [" + std::string(format(*e.actorKind)) + "]"));
  add("reason", fromUtf8(e.reason));
  if (e.flowKind) add("flow", eventLabel(e));
  add("gateway reference", fromUtf8(e.externalRef));
  add("agent", fromUtf8(e.agentId));
  add("trace", fromUtf8(e.traceId));
  return lines.join(QLatin1Char('\n'));
}

QColor eventColour(const StoryEvent& e) {
  switch (e.kind) {
    case StoryEventKind::Attempt: {
      const Outcome outcome = e.outcome.value_or(Outcome::Executed);
      if (const QColor c = outcomeForeground(outcome); c.isValid()) return c;
      if (outcome == Outcome::Replayed) return toneColor(Tone::Settleable);
      if (outcome == Outcome::InProgress) return toneColor(Tone::MutedText);
      return toneColor(Tone::Waiting);  // executed: the caller went downstream
    }
    case StoryEventKind::Transition:
      return statusForeground(e.toStatus.value_or(RecordStatus::Processing));
    case StoryEventKind::LeaseExpiry:
      return toneColor(Tone::NeedsPerson);
    case StoryEventKind::FundFlow:
      // As the business type declares it (idem.side_effect_role), never a list of kinds here.
      switch (e.flowRole.value_or(SideEffectRole::None)) {
        case SideEffectRole::Effect:
          return toneColor(Tone::MoneyMoved);
        case SideEffectRole::Reversal:
          return toneColor(Tone::Settleable);
        case SideEffectRole::None:
          return toneColor(Tone::MutedText);
      }
      return toneColor(Tone::MutedText);
  }
  return {};
}

TimelineLayout::TimelineLayout(const BusinessObjectStory& story, int mostTicks) {
  for (const StoryEvent& e : story.events) {
    if (std::find(lanes_.begin(), lanes_.end(), e.key) == lanes_.end()) lanes_.push_back(e.key);
  }
  if (story.events.empty()) return;
  const auto [lo, hi] =
      std::minmax_element(story.events.begin(), story.events.end(),
                          [](const StoryEvent& a, const StoryEvent& b) { return a.at < b.at; });
  first_ = lo->at;
  last_ = hi->at;
  const microseconds span = last_ - first_;
  step_ = kSteps.back();
  for (microseconds s : kSteps) {
    if (span / s < std::max(1, mostTicks)) {
      step_ = s;
      break;
    }
  }
}

int TimelineLayout::laneOf(const StoryEvent& e) const {
  const auto it = std::find(lanes_.begin(), lanes_.end(), e.key);
  return it == lanes_.end() ? -1 : static_cast<int>(it - lanes_.begin());
}

double TimelineLayout::xOf(Timestamp at, double width) const {
  const auto span = (last_ - first_).count();
  if (span <= 0) return width / 2;
  return width * static_cast<double>((at - first_).count()) / static_cast<double>(span);
}

std::vector<Timestamp> TimelineLayout::ticks() const {
  std::vector<Timestamp> out;
  if (step_.count() == 0) return out;  // no events
  const microseconds step = step_;
  if (last_ == first_) {
    out.push_back(first_);
    return out;
  }
  const auto since = first_.time_since_epoch();
  Timestamp t(((since + step - microseconds(1)) / step) * step);  // the first multiple >= first
  for (; t <= last_; t += step) out.push_back(t);
  return out;
}

QString TimelineLayout::tickLabel(Timestamp t) const {
  const QDateTime local = toDateTime(t).toLocalTime();
  if (step_ >= std::chrono::hours(24)) return local.toString(QStringLiteral("MM-dd HH:mm"));
  if (step_ >= std::chrono::seconds(1)) return local.toString(QStringLiteral("HH:mm:ss"));
  return local.toString(QStringLiteral("HH:mm:ss.zzz"));
}

}  // namespace idem::admin

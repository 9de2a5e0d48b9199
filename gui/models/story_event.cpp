#include "models/story_event.hpp"

#include <pqxx/pqxx>

#include "idem/vocabulary.hpp"
#include "models/sql_row.hpp"

namespace idem::admin {
namespace {

// idem.expire_leases writes its transitions with this reason (sql/migrations/003, idem.act).
constexpr std::string_view kLeaseExpiredReason = "lease expired";

template <typename E>
std::optional<E> parsed(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return parse<E>(f.c_str());
}

}  // namespace

std::string_view eventTable(StoryEventKind kind) {
  switch (kind) {
    case StoryEventKind::Attempt:
      return "attempt";
    case StoryEventKind::Transition:
    case StoryEventKind::LeaseExpiry:
      return "transition";
    case StoryEventKind::FundFlow:
      return "fund_flow";
  }
  return {};
}

std::string StoryEvent::identity() const {
  return std::string(eventTable(kind)) + "#" + std::to_string(eventId);
}

StoryEvent storyEventFromRow(const pqxx::row& r) {
  StoryEvent e;
  e.at = micros(r[0]);
  const std::string_view event = r[1].c_str();
  e.kind = event == eventTable(StoryEventKind::Attempt)      ? StoryEventKind::Attempt
           : event == eventTable(StoryEventKind::Transition) ? StoryEventKind::Transition
                                                             : StoryEventKind::FundFlow;
  e.eventId = r[2].as<std::int64_t>();
  e.key = textOrEmpty(r[3]);
  e.bizType = textOrEmpty(r[4]);
  e.bizId = textOrEmpty(r[5]);
  e.source = parsed<TriggerSource>(r[6]);
  e.outcome = parsed<Outcome>(r[7]);
  e.fromStatus = parsed<RecordStatus>(r[8]);
  e.toStatus = parsed<RecordStatus>(r[9]);
  e.actor = textOrEmpty(r[10]);
  e.actorKind = parsed<ActorKind>(r[11]);
  e.reason = textOrEmpty(r[12]);
  e.flowKind = parsed<FundFlowKind>(r[13]);
  if (!r[14].is_null()) e.amountMinor = r[14].as<std::int64_t>();
  e.currency = textOrEmpty(r[15]);
  e.externalRef = textOrEmpty(r[16]);
  e.agentId = textOrEmpty(r[17]);
  e.traceId = textOrEmpty(r[18]);
  e.flowRole = parsed<SideEffectRole>(r[19]);
  if (e.kind == StoryEventKind::Transition && e.fromStatus == RecordStatus::Processing &&
      e.toStatus == RecordStatus::Unknown && e.reason.starts_with(kLeaseExpiredReason)) {
    e.kind = StoryEventKind::LeaseExpiry;
  }
  return e;
}

}  // namespace idem::admin

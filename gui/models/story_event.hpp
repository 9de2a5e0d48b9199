// One event of a story, the composite type idem.story_event
// (sql/migrations/012_money_questions.sql): an attempt, a transition or a fund flow. Both stories
// return it, idem.trace_story (the Trace audit tab) and idem.business_object_story (the timeline),
// and both read it here, into one row type with the vocabulary's enums, so the two views cannot
// read the same columns two ways.
#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/row>
#include <string>
#include <string_view>

#include "idem/domain.hpp"
#include "idem/sql_fragments.hpp"

// idem.story_event's columns in the order storyEventFromRow reads them, `at` as epoch
// microseconds, then a fund flow's role as its business type declares it: "SELECT "
// IDEM_SQL_STORY_COLUMNS " FROM idem.trace_story($1, $2)".
#define IDEM_SQL_STORY_COLUMNS                                                                   \
  IDEM_SQL_MICROS("at")                                                                          \
  ", event, event_id, idempotency_key, biz_type, biz_id, trigger_source, outcome, from_status, " \
  "to_status, actor, actor_kind, reason, flow_kind, amount_minor, currency, external_ref, "      \
  "agent_id, trace_id, "                                                                         \
  "CASE WHEN flow_kind IS NOT NULL THEN idem.side_effect_role(biz_type, flow_kind) END"

namespace idem::admin {

enum class StoryEventKind {
  Attempt,
  Transition,
  FundFlow,
  // The transition PROCESSING -> UNKNOWN that idem.expire_leases made: nobody answered in time.
  LeaseExpiry,
};

// The `event` column's text, the table the row comes from: "attempt", "transition" (a lease
// expiry is one) or "fund_flow".
std::string_view eventTable(StoryEventKind kind);

// One row of business_object_story or trace_story; what does not apply to the event's kind is
// empty (the database's NULL: none of these columns holds an empty text).
struct StoryEvent {
  Timestamp at{};
  StoryEventKind kind = StoryEventKind::Attempt;
  std::int64_t eventId = 0;
  std::string key;  // empty: a fund flow recorded without a key
  std::string bizType;
  std::string bizId;
  std::optional<TriggerSource> source;
  std::optional<Outcome> outcome;
  std::optional<RecordStatus> fromStatus;
  std::optional<RecordStatus> toStatus;
  std::string actor;
  std::optional<ActorKind> actorKind;
  std::string reason;
  std::optional<FundFlowKind> flowKind;
  // A fund flow: what it is to the side effect, as the database reads the type's declaration.
  std::optional<SideEffectRole> flowRole;
  std::optional<std::int64_t> amountMinor;
  std::string currency;
  std::string externalRef;
  std::string agentId;
  std::string traceId;

  bool operator==(const StoryEvent&) const = default;
  // Unique within a story: the row's table and its id there.
  std::string identity() const;
  bool hasBusinessObject() const { return !bizType.empty() && !bizId.empty(); }
};

// A row selected as IDEM_SQL_STORY_COLUMNS.
StoryEvent storyEventFromRow(const pqxx::row& row);

}  // namespace idem::admin

// An incident's story (idem.trace_story, sql/migrations/012_money_questions.sql): every attempt of
// one trace or one agent across all its keys, the transitions of those keys and the fund flows of
// their business objects, in time order. The audit question of the seeds: which request came first,
// where it timed out, who triggered the retry, whether both carried the same key.
#pragma once

#include <pqxx/connection>
#include <string>
#include <vector>

#include "models/keyed_rows_model.hpp"
#include "models/story_event.hpp"

namespace idem::admin {

// Whose story: a trace or an agent.
enum class StorySubject { Trace, Agent };

struct StoryQuery {
  StorySubject subject = StorySubject::Trace;
  std::string id;
  bool operator==(const StoryQuery&) const = default;
};

std::vector<StoryEvent> readTraceStory(pqxx::connection& c, const StoryQuery& query);

// The events as a table, one row each. A lease expiry is a transition here (event "transition",
// PROCESSING -> UNKNOWN, its reason), as the database records it; the timeline marks it apart.
class TraceStoryModel : public KeyedRowsModel<StoryEvent, std::string> {
  Q_OBJECT

 public:
  enum Columns {
    When,
    Event,
    Key,
    Source,
    Outcome,
    FromTo,
    Actor,
    Flow,
    Reason,
    Agent,
    Trace,
    ColumnCount
  };
  static constexpr auto kTitles =
      columnTitles<ColumnCount>("When", "Event", "Idempotency key", "Source", "Outcome",
                                "From \u2192 to", "Actor", "Flow", "Reason", "Agent", "Trace");
  enum Roles {
    EventRole = Qt::UserRole,  // QString: attempt, transition, fund_flow (eventTable)
    BizTypeRole,               // QString, empty when the event has no business object
    BizIdRole,
    ExportRole,
  };

  using KeyedRowsModel::KeyedRowsModel;

  void setEvents(std::vector<StoryEvent> events) { replaceRows(std::move(events)); }

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const StoryEvent& e, int column, int role) const override;
  std::string keyOf(const StoryEvent& e) const override { return e.identity(); }
  bool sameContent(const StoryEvent&, const StoryEvent&) const override { return true; }  // history

 private:
  QVariant display(const StoryEvent& e, int column) const;
};

}  // namespace idem::admin

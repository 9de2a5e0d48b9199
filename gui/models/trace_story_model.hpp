// An incident's story (idem.trace_story, sql/012_money_questions.sql): every attempt of one trace
// or one agent across all its keys, the transitions of those keys and the fund flows of their
// business objects, in time order. The audit question of the seeds: which request came first,
// where it timed out, who triggered the retry, whether both carried the same key.
#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

struct AuditEvent {
  Timestamp at{};
  std::string event;  // attempt, transition, fund_flow
  std::int64_t eventId = 0;
  std::optional<std::string> idempotencyKey;
  std::optional<std::string> bizType;
  std::optional<std::string> bizId;
  std::optional<std::string> triggerSource;
  std::optional<std::string> outcome;
  std::optional<std::string> fromStatus;
  std::optional<std::string> toStatus;
  std::optional<std::string> actor;
  std::optional<std::string> actorKind;
  std::optional<std::string> reason;
  std::optional<std::string> flowKind;
  std::optional<std::int64_t> amountMinor;
  std::optional<std::string> currency;
  std::optional<std::string> externalRef;
  std::optional<std::string> agentId;
  std::optional<std::string> traceId;

  bool operator==(const AuditEvent&) const = default;
  std::string identity() const { return event + "#" + std::to_string(eventId); }
  bool hasBusinessObject() const { return bizType && bizId; }
};

// Whose story: a trace or an agent.
enum class StorySubject { Trace, Agent };

struct StoryQuery {
  StorySubject subject = StorySubject::Trace;
  std::string id;
  bool operator==(const StoryQuery&) const = default;
};

std::vector<AuditEvent> readTraceStory(pqxx::connection& c, const StoryQuery& query);

class TraceStoryModel : public KeyedRowsModel<AuditEvent, std::string> {
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
  enum Roles {
    EventRole = Qt::UserRole,  // QString: attempt, transition, fund_flow
    BizTypeRole,               // QString, empty when the event has no business object
    BizIdRole,
    ExportRole,
  };

  using KeyedRowsModel::KeyedRowsModel;

  void setEvents(std::vector<AuditEvent> events) { replaceRows(std::move(events)); }

  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 protected:
  QVariant cellData(const AuditEvent& e, int column, int role) const override;
  std::string keyOf(const AuditEvent& e) const override { return e.identity(); }
  bool sameContent(const AuditEvent&, const AuditEvent&) const override { return true; }  // history

 private:
  QVariant display(const AuditEvent& e, int column) const;
};

}  // namespace idem::admin

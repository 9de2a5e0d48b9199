// A record's history, oldest first: every status change with who made it and why (idem.transitions,
// written by the database itself). The settle dialog reuses it for "what changed since you looked".
#pragma once

#include <cstdint>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

class TransitionModel : public KeyedRowsModel<Transition, std::int64_t> {
  Q_OBJECT

 public:
  enum Columns { When, From, To, Version, Actor, ActorKind, Reason, Evidence, ColumnCount };
  static constexpr auto kTitles = columnTitles<ColumnCount>("When", "From", "To", "Ver.", "Actor",
                                                            "Kind", "Reason", "Evidence");
  enum Roles {
    ToStatusRole = Qt::UserRole,  // int: idem::RecordStatus
    IsOperatorRole,               // bool: a person's decision
    ExportRole,
    ActorKindRole,  // int: idem::ActorKind
  };

  using KeyedRowsModel::KeyedRowsModel;

  void setTransitions(std::vector<Transition> transitions) { replaceRows(std::move(transitions)); }

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const Transition& t, int column, int role) const override;
  std::int64_t keyOf(const Transition& t) const override { return t.id; }
  bool sameContent(const Transition& a, const Transition& b) const override {
    return a.version == b.version && a.toStatus == b.toStatus;  // append-only: never edited
  }
};

}  // namespace idem::admin

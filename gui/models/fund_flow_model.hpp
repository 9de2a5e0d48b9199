// The ledger lines of a record's business object (idem.fund_flows), oldest first. A duplicate (a
// second flow of the same kind under another gateway reference) is the double charge the product
// exists to surface, so it is highlighted. Where an operator weighs "did the money move" (the
// settle dialog), the flows that count for it are marked and the others (holds, credits) greyed:
// what counts is the database's word for the flow's business type (FundFlow::role), never a list
// of kinds here.
#pragma once

#include <cstdint>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

class FundFlowModel : public KeyedRowsModel<FundFlow, std::int64_t> {
  Q_OBJECT

 public:
  enum Columns { When, Kind, Amount, ExternalRef, Key, DuplicateOf, Id, ColumnCount };
  static constexpr auto kTitles = columnTitles<ColumnCount>(
      "When", "Kind", "Amount", "Gateway ref", "Idempotency key", "Duplicate of", "Flow");
  enum Roles { IsDuplicateRole = Qt::UserRole, KindRole, ExportRole, MovesMoneyRole };

  using KeyedRowsModel::KeyedRowsModel;

  void setFlows(std::vector<FundFlow> flows) { replaceRows(std::move(flows)); }
  int duplicateCount() const;
  // Marks the flows that prove or reverse their business object's side effect and greys the
  // others (off by default).
  void setMarkingMoneyMovement(bool on);

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const FundFlow& f, int column, int role) const override;
  std::int64_t keyOf(const FundFlow& f) const override { return f.id; }
  bool sameContent(const FundFlow&, const FundFlow&) const override { return true; }  // append-only

 private:
  bool markingMoneyMovement_ = false;
};

}  // namespace idem::admin

// The ledger lines of a record's business object (idem.fund_flows), oldest first. A duplicate (a
// second flow of the same kind under another gateway reference) is the double charge the product
// exists to surface, so it is highlighted.
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
  enum Roles { IsDuplicateRole = Qt::UserRole, KindRole, ExportRole };

  using KeyedRowsModel::KeyedRowsModel;

  void setFlows(std::vector<FundFlow> flows) { replaceRows(std::move(flows)); }
  int duplicateCount() const;

  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 protected:
  std::int64_t keyOf(const FundFlow& f) const override { return f.id; }
  bool sameContent(const FundFlow&, const FundFlow&) const override { return true; }  // append-only
};

}  // namespace idem::admin

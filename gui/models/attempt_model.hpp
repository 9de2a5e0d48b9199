// Every request that reached the layer under a record's key, newest first (idem.attempts): which
// retry source sent it, what the layer answered, from which agent and trace.
#pragma once

#include <cstdint>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

class AttemptModel : public KeyedRowsModel<Attempt, std::int64_t> {
  Q_OBJECT

 public:
  enum Columns { When, Source, Outcome, Agent, Trace, RequestHash, ColumnCount };
  static constexpr auto kTitles =
      columnTitles<ColumnCount>("When", "Source", "Outcome", "Agent", "Trace", "Request hash");
  enum Roles { OutcomeRole = Qt::UserRole, ExportRole };

  using KeyedRowsModel::KeyedRowsModel;

  void setAttempts(std::vector<Attempt> attempts) { replaceRows(std::move(attempts)); }

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const Attempt& a, int column, int role) const override;
  std::int64_t keyOf(const Attempt& a) const override { return a.id; }
  bool sameContent(const Attempt&, const Attempt&) const override { return true; }  // append-only
};

}  // namespace idem::admin

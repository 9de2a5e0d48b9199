// The Overcharges tab: every business object charged more than once (DEBIT and CAPTURE beyond the
// first charge plus REFUNDs), how much is owed back, which flows, keys and agents did it, and the
// selected object's records and flows. Nothing here marks one resolved: the ledger does, when the
// REFUND flow is recorded, and the next refresh removes the row.
#pragma once

#include "models/overcharge_model.hpp"
#include "widgets/business_object_tab.hpp"

class QLabel;
class QSpinBox;

namespace idem::admin {

class OverchargesView : public BusinessObjectTab {
  Q_OBJECT

 public:
  OverchargesView(DatabaseSession* session, QWidget* parent = nullptr);

  OverchargeModel* model() { return &model_; }
  std::chrono::seconds span() const;

  void refresh();

 signals:
  void countChanged(int rows);

 private:
  void onRows(const std::vector<Overcharge>& rows);

  OverchargeModel model_;
  QSpinBox* windowHours_;
  QLabel* summary_;
};

}  // namespace idem::admin

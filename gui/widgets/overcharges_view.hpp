// The Overcharges tab: every business object charged more than once (DEBIT and CAPTURE beyond the
// first charge plus REFUNDs), how much is owed back, which flows, keys and agents did it, and the
// selected object's records and flows. Nothing here marks one resolved: the ledger does, when the
// REFUND flow is recorded, and the next refresh removes the row.
#pragma once

#include <QWidget>

#include "models/overcharge_model.hpp"
#include "models/request_tracker.hpp"

class QLabel;
class QSpinBox;
class QTreeView;

namespace idem::admin {

class BusinessObject;
class DatabaseSession;
class RefreshStamp;

class OverchargesView : public QWidget {
  Q_OBJECT

 public:
  OverchargesView(DatabaseSession* session, QWidget* parent = nullptr);

  OverchargeModel* model() { return &model_; }
  BusinessObject* object() const { return object_; }
  QTreeView* table() const { return table_; }
  RefreshStamp* stamp() const { return stamp_; }
  bool isLoading() const { return requests_.isRunning(); }
  std::chrono::seconds window() const;

  void refresh();

 signals:
  void countChanged(int rows);

 private:
  void onRows(const std::vector<Overcharge>& rows);

  DatabaseSession* session_;
  OverchargeModel model_;
  BusinessObject* object_;
  RequestTracker requests_{this};
  QSpinBox* windowHours_;
  QLabel* summary_;
  RefreshStamp* stamp_;
  QTreeView* table_;
};

}  // namespace idem::admin

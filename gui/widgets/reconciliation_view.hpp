// The Reconciliation tab: the answers to both money questions over a window and a grace period
// (the exporter's defaults, 24 h and 5 min), and for the selected row its business object's
// records and fund flows side by side. From a "money moved, no SUCCESS" row, Settle SUCCESS...
// opens the settle dialog on its UNKNOWN or expired PROCESSING record (Correct to SUCCESS... on a
// FAILED one) with the charge filled in as evidence; the operator still confirms and gives the
// reason. A SUCCESS row has nothing to settle: it only tells its story.
#pragma once

#include <QPointer>

#include "models/reconciliation_model.hpp"
#include "models/worker_replies.hpp"
#include "widgets/business_object_tab.hpp"

class QAction;
class QLabel;
class QSpinBox;
class QToolButton;

namespace idem::admin {

class SettleDialog;

class ReconciliationView : public BusinessObjectTab {
  Q_OBJECT

 public:
  ReconciliationView(DatabaseSession* session, QWidget* parent = nullptr);

  ReconciliationModel* model() { return &model_; }
  QAction* settleAction() const { return settleAction_; }
  SettleDialog* settleDialog() const;

  ReconciliationWindow span() const;
  void setSpan(const ReconciliationWindow& span);
  // Re-reads both questions (and the selected object); skipped while a read is on its way.
  void refresh();
  // Selects the row of this business object (money moved) or SUCCESS record; false if not shown.
  bool selectRow(const std::string& identity);
  // Opens the settle dialog for the selected row's record, once its evidence is read: watch
  // settleDialogOpened.
  void settleSelected();

 signals:
  // The row count changed: the tab's title.
  void countChanged(int rows);
  void settleDialogOpened(idem::admin::SettleDialog* dialog);
  void recordSettled(const QString& key, const QString& message);

 private:
  void setUpSpanControls();
  void onRows(const std::vector<ReconciliationRow>& rows);
  void onCurrentChanged();
  void updateSettleAction();
  void openDialog(const RecordEvidence& evidence, const ReconciliationRow& row);
  const ReconciliationRow* currentRow() const;

  ReconciliationModel model_;
  RequestTracker evidence_{this};
  QSpinBox* windowHours_;
  QSpinBox* graceMinutes_;
  QLabel* summary_;
  QLabel* settleHint_;
  QToolButton* settleButton_;
  QAction* settleAction_;
  QPointer<SettleDialog> dialog_;
};

}  // namespace idem::admin

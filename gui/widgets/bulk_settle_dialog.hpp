// Settle many records at once: the selected rows, or all that match the records table's filter
// (counted by the server; more than kBulkSettleCap is refused by name). One decision, one reason
// (blank refused before anything is sent); each record then goes through the single settle's
// checked path with its own listed version (models/bulk_settle). A progress bar, a Cancel that
// stops between records, and a result table of what was settled and what was refused and why,
// exportable as CSV.
#pragma once

#include <QDialog>
#include <vector>

#include "models/bulk_settle.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"

class QIODevice;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QRadioButton;
class QTableView;

namespace idem::admin {

class DatabaseSession;

class BulkSettleDialog : public QDialog {
  Q_OBJECT

 public:
  explicit BulkSettleDialog(DatabaseSession* session, QWidget* parent = nullptr);

  // The records to settle, with the versions their list showed; `what` says where they came from
  // ("12 selected records").
  void setTargets(std::vector<BulkTarget> targets, const QString& what);
  // All records matching `filter`: the server lists them (emits listed()).
  void listMatching(const RecordFilter& filter);

  int targetCount() const { return static_cast<int>(targets_.size()); }
  qint64 matchingCount() const { return matching_; }
  QString countText() const;
  QString message() const;
  BulkSettle* run() { return &run_; }
  BulkResultModel* results() { return run_.results(); }

  // What the radio buttons, the reason field and the buttons do.
  void chooseTarget(RecordStatus to);
  void setReason(const QString& reason);
  bool start();
  void cancelRun();
  // The result table as CSV (RFC 4180); the rows written, -1 on a write error.
  int exportCsv(QIODevice& out) const;

 signals:
  void listed();
  void finished();

 protected:
  void reject() override;

 private:
  void setUpFields();
  void layOut();
  void wireSignals();
  void showCount();
  void showMessage(const QString& text, bool error);
  void onProgress(int processed, int total);
  void onFinished();
  void exportToFile();
  void updateButtons();

  DatabaseSession* session_;
  BulkSettle run_;
  RequestTracker listing_{this};
  std::vector<BulkTarget> targets_;
  qint64 matching_ = 0;
  QString what_;

  QLabel* count_;
  QRadioButton* toSuccess_;
  QRadioButton* toFailed_;
  QPlainTextEdit* reason_;
  QLabel* message_;
  QProgressBar* progress_;
  QTableView* table_;
  QLabel* summary_;
  QPushButton* startButton_;
  QPushButton* cancelButton_;
  QPushButton* exportButton_;
  QPushButton* closeButton_;
};

}  // namespace idem::admin

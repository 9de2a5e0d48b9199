// A QTableView set up for millions of lazily loaded records: fixed row heights (no per-row
// measuring), one selected row or many (Ctrl/Shift-click, for bulk settle), sensible column
// widths, and the sort column marked.
#pragma once

#include <QTableView>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/record_filter.hpp"

namespace idem::admin {

class RecordTableModel;

class RecordTableView : public QTableView {
  Q_OBJECT

 public:
  explicit RecordTableView(QWidget* parent = nullptr);

  // Shows the model and keeps the operator's place across its refreshes: when rows arrive above
  // the first visible one, that row stays first (at the very top, new rows simply appear).
  void setRecordModel(RecordTableModel* model);
  RecordTableModel* recordModel() const { return records_; }
  // Widths for the record columns.
  void applyRecordColumnWidths();
  void showOrder(RecordOrder order);
  // The selected rows' records, top to bottom (Ctrl/Shift-click selects many: bulk settle).
  std::vector<Record> selectedRecords() const;

 signals:
  // The operator clicked the Updated or Created header.
  void orderRequested(idem::admin::RecordOrder order);

 private:
  void rememberTopRow();
  void restoreTopRow();

  RecordTableModel* records_ = nullptr;
  RecordOrder order_ = RecordOrder::UpdatedDesc;
  std::string topKey_;
};

}  // namespace idem::admin

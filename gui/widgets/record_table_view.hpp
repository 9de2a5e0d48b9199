// A QTableView set up for millions of lazily loaded records: fixed row heights (no per-row
// measuring), one selected row at a time, sensible column widths, and the sort column marked.
#pragma once

#include <QTableView>

#include "models/record_filter.hpp"

namespace idem::admin {

class RecordTableView : public QTableView {
  Q_OBJECT

 public:
  explicit RecordTableView(QWidget* parent = nullptr);

  // Call after setModel(): widths for the record columns.
  void applyRecordColumnWidths();
  void showOrder(RecordOrder order);

 signals:
  // The operator clicked the Updated or Created header.
  void orderRequested(idem::admin::RecordOrder order);

 private:
  RecordOrder order_ = RecordOrder::UpdatedDesc;
};

}  // namespace idem::admin

// The Records tab: every record, the filter bar over them (key, biz type and id, status, agent,
// order; Find, Ctrl+F, brings the tab up with the search field focused), the "last refreshed"
// stamp and the table, read page by page as the operator scrolls. Ctrl+1 brings it up.
#pragma once

#include <QWidget>

#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseSession;
class RecordFilterBar;
class RecordTableModel;
class RecordTableView;
class RefreshStamp;

class RecordsView : public QWidget {
  Q_OBJECT

 public:
  RecordsView(DatabaseSession* session, int pageSize, QWidget* parent = nullptr);

  RecordTableModel* model() const { return model_; }
  RecordTableView* table() const { return table_; }
  RecordFilterBar* filterBar() const { return filterBar_; }
  RefreshStamp* stamp() const { return stamp_; }

  // Re-reads the loaded rows. An automatic refresh leaves them be while the operator is scrolled
  // away from where new rows would appear (RecordTableModel::refreshKeepsPosition).
  void refresh(bool automatic);
  // The biz types of rows read in any records table, offered by the filter bar.
  void learnBizTypes(const RecordPage& page);

 private:
  RecordTableModel* model_;
  RecordFilterBar* filterBar_;
  RefreshStamp* stamp_;
  RecordTableView* table_;
};

}  // namespace idem::admin

// The Needs attention tab: the stuck records, the one waiting longest first (PROCESSING past its
// lease and UNKNOWN), under a header that counts them and says what each needs; the tab's title
// carries the count. Ctrl+2 brings it up.
#pragma once

#include <QWidget>

#include "models/worker_replies.hpp"

class QLabel;

namespace idem::admin {

class DatabaseSession;
class RecordTableModel;
class RecordTableView;
class RefreshStamp;

class AttentionView : public QWidget {
  Q_OBJECT

 public:
  AttentionView(DatabaseSession* session, int pageSize, QWidget* parent = nullptr);

  RecordTableModel* model() const { return model_; }
  RecordTableView* table() const { return table_; }
  QLabel* header() const { return header_; }
  RefreshStamp* stamp() const { return stamp_; }

  // The header's counts (the window reads them with its status bar's).
  void showCounts(const UnsettledCounts& counts);

 private:
  RecordTableModel* model_;
  QLabel* header_;
  RefreshStamp* stamp_;
  RecordTableView* table_;
};

}  // namespace idem::admin

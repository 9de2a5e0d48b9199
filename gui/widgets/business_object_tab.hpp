// What the money tabs (Reconciliation, Overcharges) share: a bar of controls ending in the "last
// refreshed" stamp, a table of rows read by one request at a time, and under it the selected row's
// business object, its records and its fund flows side by side.
#pragma once

#include <QWidget>
#include <string>

#include "models/database_session.hpp"
#include "models/request_tracker.hpp"

class QHBoxLayout;
class QTreeView;

namespace idem::admin {

class BusinessObject;
class RefreshStamp;

class BusinessObjectTab : public QWidget {
  Q_OBJECT

 public:
  BusinessObject* object() const { return object_; }
  RefreshStamp* stamp() const { return stamp_; }
  QTreeView* table() const { return table_; }
  bool isLoading() const { return requests_.isRunning(); }

 protected:
  BusinessObjectTab(DatabaseSession* session, const QString& name, QWidget* parent);

  // The controls go here, before the stamp.
  QHBoxLayout* bar() const { return bar_; }
  // The rows' table, above the object's records and flows; its current row chooses the object.
  void setRowsTable(QTreeView* table);
  void showObject(const std::string& bizType, const std::string& bizId);
  // Reads the rows (work on the worker thread), stamps the time and hands them to onRows; a
  // failure marks the stamp. The selected object is re-read with them.
  template <typename Work, typename OnRows>
  void read(const char* what, Work work, OnRows onRows);

  DatabaseSession* session_;

 private:
  void markFailed(const RequestError& error);
  void refreshObject();
  void stampNow();

  BusinessObject* object_;
  RefreshStamp* stamp_;
  QHBoxLayout* bar_;
  QTreeView* table_ = nullptr;
  RequestTracker requests_{this};
};

template <typename Work, typename OnRows>
void BusinessObjectTab::read(const char* what, Work work, OnRows onRows) {
  if (!session_->isConnected()) return;
  using Rows = std::invoke_result_t<const Work&, pqxx::connection&>;
  session_->submit(
      requests_, what, std::move(work),
      [this, onRows](const Rows& rows) {
        stampNow();
        onRows(rows);
      },
      [this](const RequestError& e) { markFailed(e); });
  refreshObject();
}

}  // namespace idem::admin

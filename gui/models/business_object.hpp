// One business object's evidence, for the money views: its records (the records table's model,
// filtered to the object) and its fund flows. Choosing another object drops what was shown and
// any late answer for the previous one.
#pragma once

#include <QObject>
#include <QSortFilterProxyModel>
#include <string>

#include "models/fund_flow_model.hpp"
#include "models/record_table_model.hpp"
#include "models/request_tracker.hpp"

namespace idem::admin {

class DatabaseSession;

class BusinessObject : public QObject {
  Q_OBJECT

 public:
  explicit BusinessObject(DatabaseSession* session, QObject* parent = nullptr);

  // Empty bizType clears it.
  void select(const std::string& bizType, const std::string& bizId);
  void refresh();

  const std::string& bizType() const { return bizType_; }
  const std::string& bizId() const { return bizId_; }
  // The object's records, newest change first. The records model filters by biz id prefix; the
  // proxy keeps the exact biz id ("ord-1" is not "ord-10").
  QAbstractItemModel* records() { return &exactRecords_; }
  RecordTableModel* recordModel() { return &records_; }
  FundFlowModel* fundFlows() { return &fundFlows_; }
  bool isLoading() const { return flows_.isRunning() || records_.isLoading(); }

 signals:
  void failed(const QString& message);

 private:
  void requestFlows();

  DatabaseSession* session_;
  std::string bizType_;
  std::string bizId_;
  RecordTableModel records_;
  QSortFilterProxyModel exactRecords_;
  FundFlowModel fundFlows_;
  RequestTracker flows_;
};

}  // namespace idem::admin

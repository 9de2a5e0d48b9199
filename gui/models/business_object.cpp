#include "models/business_object.hpp"

#include <QRegularExpression>
#include <pqxx/pqxx>

#include "idem/record_queries.hpp"
#include "models/database_session.hpp"

namespace idem::admin {

BusinessObject::BusinessObject(DatabaseSession* session, QObject* parent)
    : QObject(parent), session_(session), records_(session, this), flows_(this) {
  exactRecords_.setSourceModel(&records_);
  exactRecords_.setFilterKeyColumn(RecordTableModel::BizId);
  // Matches nothing until an object is chosen.
  exactRecords_.setFilterRegularExpression(QRegularExpression(QStringLiteral("^(?!)")));
  connect(&records_, &RecordTableModel::fetchFailed, this, &BusinessObject::failed);
}

void BusinessObject::select(const std::string& bizType, const std::string& bizId) {
  if (bizType == bizType_ && bizId == bizId_) return;
  bizType_ = bizType;
  bizId_ = bizId;
  flows_.cancel();
  fundFlows_.setFlows({});
  if (bizType_.empty()) {
    exactRecords_.setFilterRegularExpression(QRegularExpression(QStringLiteral("^(?!)")));
    return;
  }
  exactRecords_.setFilterRegularExpression(QRegularExpression(
      QStringLiteral("^%1$").arg(QRegularExpression::escape(QString::fromStdString(bizId_)))));
  RecordFilter filter;
  filter.bizType = bizType_;
  filter.bizIdPrefix = bizId_;
  records_.setFilter(filter);
  requestFlows();
}

void BusinessObject::refresh() {
  if (bizType_.empty()) return;
  records_.refresh();
  if (!flows_.isRunning()) requestFlows();
}

void BusinessObject::requestFlows() {
  session_->submit(
      flows_, "read the fund flows",
      [type = bizType_, id = bizId_](pqxx::connection& c) {
        pqxx::read_transaction tx(c);
        std::vector<FundFlow> flows = idem::fundFlowsOf(tx, type, id);
        tx.commit();
        return flows;
      },
      [this](const std::vector<FundFlow>& flows) { fundFlows_.setFlows(flows); },
      [this](const RequestError& error) { emit failed(QString::fromStdString(error.what())); });
}

}  // namespace idem::admin

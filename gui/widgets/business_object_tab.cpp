#include "widgets/business_object_tab.hpp"

#include <QGroupBox>
#include <QHBoxLayout>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

#include "models/business_object.hpp"
#include "widgets/console_table.hpp"
#include "widgets/refresh_stamp.hpp"

namespace idem::admin {
namespace {

QGroupBox* boxed(QTreeView* table, const QString& title, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  auto* layout = new QVBoxLayout(box);
  layout->addWidget(table);
  return box;
}

}  // namespace

BusinessObjectTab::BusinessObjectTab(DatabaseSession* session, const QString& name, QWidget* parent)
    : QWidget(parent),
      session_(session),
      object_(new BusinessObject(session, this)),
      stamp_(new RefreshStamp(this)),
      bar_(new QHBoxLayout) {
  setObjectName(name);
  bar_->setContentsMargins(8, 6, 8, 6);
  object_->fundFlows()->setMarkingMoneyMovement(true);
}

void BusinessObjectTab::setRowsTable(QTreeView* table) {
  table_ = table;
  bar_->addSpacing(12);
  bar_->addWidget(stamp_);

  QTreeView* records =
      makeConsoleTable(object_->records(), this, objectName() + QStringLiteral("Records"),
                       {RecordTableModel::Key, RecordTableModel::BizId});
  for (int c : {RecordTableModel::Age, RecordTableModel::Tool, RecordTableModel::Attempts,
                RecordTableModel::Created}) {
    records->setColumnHidden(c, true);
  }
  QTreeView* flows = makeConsoleTable(object_->fundFlows(), this,
                                      objectName() + QStringLiteral("Flows"), {FundFlowModel::Key});
  auto* sides = new QSplitter(Qt::Horizontal, this);
  sides->addWidget(boxed(records, QStringLiteral("Records of the business object"), this));
  sides->addWidget(boxed(flows, QStringLiteral("Fund flows of the business object"), this));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table);
  split->addWidget(sides);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar_);
  layout->addWidget(split, 1);
}

void BusinessObjectTab::showObject(const std::string& bizType, const std::string& bizId) {
  object_->select(bizType, bizId);
}

void BusinessObjectTab::refreshObject() {
  object_->refresh();
}

void BusinessObjectTab::stampNow() {
  stamp_->stamp();
}

void BusinessObjectTab::markFailed(const RequestError& error) {
  stamp_->markFailed(QString::fromStdString(error.what()));
}

}  // namespace idem::admin

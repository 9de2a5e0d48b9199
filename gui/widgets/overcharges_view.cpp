#include "widgets/overcharges_view.hpp"

#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>
#include <map>

#include "models/business_object.hpp"
#include "models/database_session.hpp"
#include "models/money_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/refresh_stamp.hpp"

namespace idem::admin {

OverchargesView::OverchargesView(DatabaseSession* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      object_(new BusinessObject(session, this)),
      windowHours_(new QSpinBox(this)),
      summary_(new QLabel(this)),
      stamp_(new RefreshStamp(this)) {
  setObjectName(QStringLiteral("overchargesView"));
  windowHours_->setObjectName(QStringLiteral("overchargesWindow"));
  windowHours_->setRange(1, 24 * 30);
  windowHours_->setValue(24);
  windowHours_->setSuffix(QStringLiteral(" h"));
  windowHours_->setToolTip(
      QStringLiteral("Objects charged within this window; all of each object's flows are weighed"));
  summary_->setObjectName(QStringLiteral("overchargesSummary"));
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(8, 6, 8, 6);
  bar->addWidget(new QLabel(QStringLiteral("Charged within:"), this));
  bar->addWidget(windowHours_);
  bar->addSpacing(12);
  bar->addWidget(summary_, 1);
  bar->addWidget(stamp_);

  table_ = makeConsoleTable(&model_, this, QStringLiteral("overchargesTable"),
                            {OverchargeModel::BizId, OverchargeModel::Keys});
  fitColumns(table_,
             {QStringLiteral("payment"), QStringLiteral("ord-00000000"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("99 999.99 CNY"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("99"), QStringLiteral("#1234, #1235"),
              QStringLiteral("pay:ord-1:a, pay:ord-1:b"), QStringLiteral("agent-7, agent-8"),
              QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("2026-11-30 02:44:06")});
  auto* records = makeConsoleTable(object_->records(), this, QStringLiteral("overchargeRecords"),
                                   {RecordTableModel::Key, RecordTableModel::BizId});
  object_->fundFlows()->setMarkingMoneyMovement(true);
  auto* flows = makeConsoleTable(object_->fundFlows(), this, QStringLiteral("overchargeFlows"),
                                 {FundFlowModel::Key});
  auto* sides = new QSplitter(Qt::Horizontal, this);
  sides->addWidget(records);
  sides->addWidget(flows);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(sides);
  split->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(split, 1);

  connect(windowHours_, &QSpinBox::valueChanged, this, &OverchargesView::refresh);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            const Overcharge* o = model_.rowAt(current.row());
            object_->select(o ? o->bizType : std::string(), o ? o->bizId : std::string());
          });
}

std::chrono::seconds OverchargesView::window() const {
  return std::chrono::hours(windowHours_->value());
}

void OverchargesView::refresh() {
  if (!session_->isConnected()) return;
  session_->submit(
      requests_, "read the overcharged objects",
      [w = window()](pqxx::connection& c) { return readOvercharges(c, w); },
      [this](const std::vector<Overcharge>& rows) { onRows(rows); },
      [this](const RequestError& e) { stamp_->markFailed(QString::fromStdString(e.what())); });
  object_->refresh();
}

void OverchargesView::onRows(const std::vector<Overcharge>& rows) {
  model_.setOvercharges(rows);
  stamp_->stamp();
  std::map<std::string, std::int64_t> owed;  // per currency: amounts never add across currencies
  for (const Overcharge& o : rows) owed[o.currency] += o.owedMinor;
  QStringList totals;
  for (const auto& [currency, minor] : owed) totals << moneyText(minor, currency);
  summary_->setText(
      rows.empty()
          ? QStringLiteral("No overcharged business object: every extra charge is refunded.")
          : QStringLiteral("<b>%1</b> overcharged business objects, <b>%2</b> owed back. Record "
                           "the REFUND flow of each; it leaves this view on the next refresh.")
                .arg(rows.size())
                .arg(totals.join(QStringLiteral(" + "))));
  emit countChanged(model_.rowCount());
}

}  // namespace idem::admin

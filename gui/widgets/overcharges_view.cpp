#include "widgets/overcharges_view.hpp"

#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSpinBox>
#include <QTreeView>
#include <map>

#include "models/csv_writer.hpp"
#include "models/money_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/main_window.hpp"
#include "widgets/view_parts.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {

OverchargesView::OverchargesView(DatabaseSession* session, QWidget* parent)
    : BusinessObjectTab(session, QStringLiteral("overchargesView"), parent),
      windowHours_(new QSpinBox(this)),
      summary_(new QLabel(this)) {
  windowHours_->setObjectName(QStringLiteral("overchargesWindow"));
  windowHours_->setRange(1, 24 * 30);
  windowHours_->setValue(24);
  windowHours_->setSuffix(QStringLiteral(" h"));
  windowHours_->setToolTip(
      QStringLiteral("Objects charged within this window; all of each object's flows are weighed"));
  summary_->setObjectName(QStringLiteral("overchargesSummary"));
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);

  bar()->addWidget(new QLabel(QStringLiteral("Charged within:"), this));
  bar()->addWidget(windowHours_);
  bar()->addSpacing(12);
  bar()->addWidget(summary_, 1);

  QTreeView* table = makeConsoleTable(&model_, this, QStringLiteral("overchargesTable"),
                                      {OverchargeModel::BizId, OverchargeModel::Keys});
  fitColumns(table,
             {QStringLiteral("payment"), QStringLiteral("ord-00000000"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("99 999.99 CNY"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("99"), QStringLiteral("#1234, #1235"),
              QStringLiteral("pay:ord-1:a, pay:ord-1:b"), QStringLiteral("agent-7, agent-8"),
              QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("2026-11-30 02:44:06")});
  setRowsTable(table);

  connect(windowHours_, &QSpinBox::valueChanged, this, &OverchargesView::refresh);
  connect(table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            const Overcharge* o = model_.rowAt(current.row());
            showObject(o ? o->bizType : std::string(), o ? o->bizId : std::string());
          });
}

std::chrono::seconds OverchargesView::span() const {
  return std::chrono::hours(windowHours_->value());
}

void OverchargesView::refresh() {
  read(
      "read the overcharged objects",
      [w = span()](pqxx::connection& c) { return readOvercharges(c, w); },
      [this](const std::vector<Overcharge>& rows) { onRows(rows); });
}

void OverchargesView::onRows(const std::vector<Overcharge>& rows) {
  model_.setOvercharges(rows);
  std::map<std::string, std::int64_t> owed;  // per currency: amounts never add across currencies
  for (const Overcharge& o : rows) owed[o.currency] += o.owedMinor;
  QStringList totals;
  for (const auto& [currency, minor] : owed) totals << moneyText(minor, currency);
  summary_->setText(
      rows.empty()
          ? QStringLiteral("No overcharged business object: every extra charge is refunded.")
          : QStringLiteral("<b>%1</b> overcharged business %2, <b>%3</b> owed back. Record "
                           "the REFUND flow of each; it leaves this view on the next refresh.")
                .arg(rows.size())
                .arg(rows.size() == 1 ? QStringLiteral("object") : QStringLiteral("objects"))
                .arg(totals.join(QStringLiteral(" + "))));
  emit countChanged(model_.rowCount());
}

namespace {

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Overcharges"),
    .order = 40,
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new OverchargesView(c.session, parent);
          countInTitle(c, view);
          return tableView(view, QStringLiteral("overcharges"));
        },
});

}  // namespace

}  // namespace idem::admin

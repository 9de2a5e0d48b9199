#include "widgets/record_table_view.hpp"

#include <QHeaderView>
#include <QScrollBar>

#include "models/record_table_model.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/left_elide.hpp"

namespace idem::admin {

RecordTableView::RecordTableView(QWidget* parent) : QTableView(parent) {
  setSelectionBehavior(QAbstractItemView::SelectRows);
  setSelectionMode(QAbstractItemView::ExtendedSelection);
  setAlternatingRowColors(true);
  setWordWrap(false);
  setTextElideMode(Qt::ElideMiddle);
  // Keys and biz ids differ at their end: that is the part kept.
  elideFromLeft(this, {RecordTableModel::Key, RecordTableModel::BizId});
  setSortingEnabled(false);  // the server sorts: a client sort would only order the loaded rows
  setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
  verticalHeader()->setVisible(false);
  verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 8);
  horizontalHeader()->setHighlightSections(false);
  horizontalHeader()->setStretchLastSection(true);
  horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  horizontalHeader()->setSortIndicatorShown(true);
  horizontalHeader()->setSectionsClickable(true);
  connect(horizontalHeader(), &QHeaderView::sectionClicked, this, [this](int section) {
    const bool updated = section == RecordTableModel::Updated;
    const bool created = section == RecordTableModel::Created;
    if (!updated && !created) {
      showOrder(order_);  // other columns do not sort: keep the indicator where it was
      return;
    }
    const bool sameColumn = updated == sortsByUpdated(order_);
    const bool descending = sameColumn ? !isDescending(order_) : true;
    emit orderRequested(updated
                            ? (descending ? RecordOrder::UpdatedDesc : RecordOrder::UpdatedAsc)
                            : (descending ? RecordOrder::CreatedDesc : RecordOrder::CreatedAsc));
  });
}

void RecordTableView::setRecordModel(RecordTableModel* model) {
  records_ = model;
  setModel(model);
  connect(model, &RecordTableModel::refreshAboutToApply, this, &RecordTableView::rememberTopRow);
  connect(model, &RecordTableModel::refreshApplied, this, &RecordTableView::restoreTopRow);
  applyRecordColumnWidths();
}

std::vector<Record> RecordTableView::selectedRecords() const {
  QModelIndexList rows = selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end());
  std::vector<Record> out;
  for (const QModelIndex& index : rows) {
    if (const Record* r = records_->recordAt(index.row())) out.push_back(*r);
  }
  return out;
}

void RecordTableView::rememberTopRow() {
  topKey_.clear();
  if (verticalScrollBar()->value() == 0) return;
  const QModelIndex top = indexAt(QPoint(0, 0));
  if (top.isValid()) topKey_ = top.data(RecordTableModel::KeyRole).toString().toStdString();
}

void RecordTableView::restoreTopRow() {
  if (topKey_.empty()) return;
  const int row = records_->rowOfKey(topKey_);
  topKey_.clear();
  // The leftmost visible column, so keeping the row in view does not scroll sideways.
  if (row >= 0) scrollTo(records_->index(row, std::max(0, columnAt(0))), PositionAtTop);
}

void RecordTableView::applyRecordColumnWidths() {
  const QString time = QStringLiteral("2026-11-30 02:44:06");
  QStringList samples;
  samples.resize(RecordTableModel::ColumnCount);
  samples[RecordTableModel::Status] = QStringLiteral("PROCESSING");
  samples[RecordTableModel::Age] = QStringLiteral("23 h 59 min");
  samples[RecordTableModel::Key] = QStringLiteral("issue_coupon:cpn-49183:73f301");
  samples[RecordTableModel::BizType] = QStringLiteral("payment");
  samples[RecordTableModel::BizId] = QStringLiteral("ord-00000000");
  samples[RecordTableModel::Tool] = QStringLiteral("issue_coupon");
  samples[RecordTableModel::Version] = QStringLiteral("99");
  samples[RecordTableModel::Attempts] = QStringLiteral("99");
  samples[RecordTableModel::Updated] = time;
  samples[RecordTableModel::Created] = time;
  samples[RecordTableModel::LeaseExpires] = time;
  fitColumns(this, samples, RecordTableModel::Status);
  showOrder(order_);
}

void RecordTableView::showOrder(RecordOrder order) {
  order_ = order;
  horizontalHeader()->setSortIndicator(
      sortsByUpdated(order) ? RecordTableModel::Updated : RecordTableModel::Created,
      isDescending(order) ? Qt::DescendingOrder : Qt::AscendingOrder);
}

}  // namespace idem::admin

#include "widgets/column_widths.hpp"

#include <QAbstractItemView>
#include <QHeaderView>
#include <QTableView>
#include <QTreeView>

namespace idem::admin {

void fitColumns(QAbstractItemView* view, const QStringList& samples, int boldColumn) {
  QHeaderView* header = nullptr;
  if (auto* table = qobject_cast<QTableView*>(view)) header = table->horizontalHeader();
  if (auto* tree = qobject_cast<QTreeView*>(view)) header = tree->header();
  if (header == nullptr || view->model() == nullptr) return;
  QFont bold = view->font();
  bold.setBold(true);
  const QFontMetrics plain(view->font());
  const QFontMetrics strong(bold);
  const QFontMetrics headerMetrics(header->font());
  constexpr int kPadding = 18;  // cell margins and the grid line
  for (int column = 0; column < samples.size() && column < view->model()->columnCount(); ++column) {
    if (samples[column].isEmpty()) continue;
    const QFontMetrics& metrics = column == boldColumn ? strong : plain;
    const QString title = view->model()->headerData(column, Qt::Horizontal).toString();
    const int width = std::max(metrics.horizontalAdvance(samples[column]),
                               headerMetrics.horizontalAdvance(title) + 12);
    header->resizeSection(column, width + kPadding);
  }
}

}  // namespace idem::admin

#include "widgets/console_table.hpp"

#include <QTreeView>

#include "widgets/evidence_table.hpp"
#include "widgets/left_elide.hpp"
#include "widgets/table_copy.hpp"

namespace idem::admin {

QTreeView* makeConsoleTable(QAbstractItemModel* model, QWidget* parent, const QString& name,
                            std::initializer_list<int> leftElidedColumns) {
  QTreeView* view = makeEvidenceTable(model, parent, name, RowSelection::Rows);
  view->setSelectionMode(QAbstractItemView::SingleSelection);
  elideFromLeft(view, leftElidedColumns);
  enableCellCopy(view);
  return view;
}

}  // namespace idem::admin

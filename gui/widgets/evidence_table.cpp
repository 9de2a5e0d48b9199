#include "widgets/evidence_table.hpp"

#include <QHeaderView>
#include <QTreeView>

namespace idem::admin {

QTreeView* makeEvidenceTable(QAbstractItemModel* model, QWidget* parent, const QString& name,
                             RowSelection selection) {
  auto* view = new QTreeView(parent);
  view->setObjectName(name);
  view->setModel(model);
  view->setRootIsDecorated(false);
  view->setUniformRowHeights(true);
  view->setAlternatingRowColors(true);
  if (selection == RowSelection::Rows) {
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
  } else {
    view->setSelectionMode(QAbstractItemView::NoSelection);
  }
  view->setWordWrap(false);
  view->setTextElideMode(Qt::ElideRight);
  view->header()->setStretchLastSection(true);
  return view;
}

}  // namespace idem::admin

#include "widgets/table_copy.hpp"

#include <QAbstractItemView>
#include <QAction>
#include <QApplication>
#include <QClipboard>

namespace idem::admin {
namespace {

constexpr const char* kCopyActionName = "copyCellAction";

}  // namespace

QString cellText(const QModelIndex& index) {
  return index.isValid() ? index.data(Qt::DisplayRole).toString() : QString();
}

void enableCellCopy(QAbstractItemView* view) {
  if (view->findChild<QAction*>(QLatin1String(kCopyActionName), Qt::FindDirectChildrenOnly)) {
    return;
  }
  auto* copy = new QAction(QStringLiteral("&Copy"), view);
  copy->setObjectName(QLatin1String(kCopyActionName));
  copy->setShortcut(QKeySequence::Copy);
  // Only while this view has the focus: each table copies its own current cell.
  copy->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  copy->setToolTip(QStringLiteral("Copy the cell's whole text (Ctrl+C)"));
  QObject::connect(copy, &QAction::triggered, view, [view] {
    const QString text = cellText(view->currentIndex());
    if (!text.isEmpty()) QApplication::clipboard()->setText(text);
  });
  view->addAction(copy);
  view->setContextMenuPolicy(Qt::ActionsContextMenu);
}

void enableCellCopyIn(QWidget* root) {
  if (auto* view = qobject_cast<QAbstractItemView*>(root)) enableCellCopy(view);
  for (QAbstractItemView* view : root->findChildren<QAbstractItemView*>()) {
    // Combo box pop-ups and the like are lists of choices, not tables.
    if (view->inherits("QComboBoxListView")) continue;
    enableCellCopy(view);
  }
}

}  // namespace idem::admin

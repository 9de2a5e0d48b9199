// "Copy" for every table of the console, one behaviour everywhere: Ctrl+C and the context menu's
// Copy put the current cell's whole text on the clipboard (not its elided rendering), so a key or
// a gateway reference goes into a ticket or psql exactly.
#pragma once

class QAbstractItemView;
class QModelIndex;
class QString;
class QWidget;

namespace idem::admin {

// The text Copy puts on the clipboard for a cell.
QString cellText(const QModelIndex& index);

// Adds the Copy action (Ctrl+C, context menu) to one view; a second call does nothing.
void enableCellCopy(QAbstractItemView* view);
// ...to every item view under root (a window, a dialog), root included.
void enableCellCopyIn(QWidget* root);

}  // namespace idem::admin

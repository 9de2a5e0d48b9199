// The tables of the money views and the audit: read-only rows (the evidence tables' look), whole
// rows selected, Copy on every cell, and the key and biz id columns elided from the left.
#pragma once

#include <QString>
#include <initializer_list>

class QAbstractItemModel;
class QTreeView;
class QWidget;

namespace idem::admin {

QTreeView* makeConsoleTable(QAbstractItemModel* model, QWidget* parent, const QString& name,
                            std::initializer_list<int> leftElidedColumns);

}  // namespace idem::admin

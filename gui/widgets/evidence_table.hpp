// The read-only tables that show a record's evidence (timeline, attempts, fund flows), in the
// detail pane and in the settle dialog alike.
#pragma once

#include <QString>

class QAbstractItemModel;
class QTreeView;
class QWidget;

namespace idem::admin {

enum class RowSelection { Rows, None };

QTreeView* makeEvidenceTable(QAbstractItemModel* model, QWidget* parent, const QString& name,
                             RowSelection selection);

}  // namespace idem::admin

// The read-only tables that show a record's evidence (timeline, attempts, fund flows), in the
// detail pane and in the settle dialog alike.
#pragma once

#include <QString>
#include <string_view>

class QAbstractItemModel;
class QTreeView;
class QWidget;

namespace idem::admin {

enum class RowSelection { Rows, None };

QTreeView* makeEvidenceTable(QAbstractItemModel* model, QWidget* parent, const QString& name,
                             RowSelection selection);

// UTF-8 from the database or the domain types, as a QString.
inline QString fromUtf8(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

}  // namespace idem::admin

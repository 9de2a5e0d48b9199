// Column widths from what the columns hold: each column as wide as its header or a typical value
// ("2026-11-30 02:44:06", "PROCESSING"), whichever is wider, so nothing is elided at first sight.
#pragma once

#include <QStringList>

class QAbstractItemView;

namespace idem::admin {

// samples[i] is a typical value of column i; an empty sample leaves the column alone. A bold
// column (the status) is measured bold.
void fitColumns(QAbstractItemView* view, const QStringList& samples, int boldColumn = -1);

}  // namespace idem::admin

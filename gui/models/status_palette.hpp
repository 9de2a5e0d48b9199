// The colours of the four record statuses, the same in every table and dialog: PROCESSING amber
// (in flight, may become stuck), UNKNOWN red-orange (needs a person), SUCCESS green, FAILED grey.
#pragma once

#include <QColor>
#include <QString>

#include "idem/vocabulary.hpp"

namespace idem::admin {

QColor statusBackground(RecordStatus status);
QColor statusForeground(RecordStatus status);
// A "#rrggbb" pair for rich text badges.
QString statusBadgeHtml(RecordStatus status);

// Fund flows that duplicate an earlier one of the same kind: a double charge.
QColor duplicateFlowBackground();

}  // namespace idem::admin

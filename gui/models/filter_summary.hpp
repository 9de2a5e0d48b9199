// The records filter in a few words, for the window title ("UNKNOWN · payment · biz id ord-42* ·
// last 1 h"), so a screenshot or a glance at the task bar says what the table is limited to.
#pragma once

#include <QString>

#include "models/record_filter.hpp"

namespace idem::admin {

// Empty when the filter shows every record.
QString filterSummary(const RecordFilter& filter);

}  // namespace idem::admin

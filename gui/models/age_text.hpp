// How long ago, in the words an operator scans a column for: "45 s", "12 min", "3 h 20 min", "2 d 4
// h".
#pragma once

#include <QString>
#include <chrono>

namespace idem::admin {

// Two units at most; negative ages (clock skew) read as "0 s".
QString ageText(std::chrono::microseconds age);

}  // namespace idem::admin

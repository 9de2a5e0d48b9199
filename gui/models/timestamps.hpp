// idem::Timestamp (microseconds since the epoch, as timestamptz stores them) on screen and in
// files.
#pragma once

#include <QDateTime>
#include <QString>

#include "idem/domain.hpp"

namespace idem::admin {

// Millisecond precision: what QDateTime holds.
QDateTime toDateTime(Timestamp t);
Timestamp fromDateTime(const QDateTime& t);

// Local time, to the second: what an operator compares with a gateway's console.
QString displayTime(Timestamp t);
// UTC, ISO 8601 with microseconds: exact, for exports and tooltips.
QString isoTime(Timestamp t);

// The client's clock now, as a Timestamp.
Timestamp localNow();

}  // namespace idem::admin

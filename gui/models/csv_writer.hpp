// The current view as CSV (RFC 4180): a header row, then every row the model holds, fields quoted
// when they contain a comma, a quote or a line break, lines ending CRLF.
#pragma once

#include <QAbstractItemModel>
#include <QIODevice>
#include <QString>

namespace idem::admin {

// Each cell is the model's `role` value if it has one (exact values: ISO timestamps, raw numbers),
// else its display text. Returns the number of data rows written; -1 if the device refused.
int writeCsv(const QAbstractItemModel& model, QIODevice& out, int role);

// One field, quoted as RFC 4180 requires.
QString csvField(const QString& value);

}  // namespace idem::admin

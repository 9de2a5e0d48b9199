#include "models/csv_writer.hpp"

namespace idem::admin {

QString csvField(const QString& value) {
  const bool needsQuotes = value.contains(QLatin1Char(',')) || value.contains(QLatin1Char('"')) ||
                           value.contains(QLatin1Char('\n')) || value.contains(QLatin1Char('\r'));
  if (!needsQuotes) return value;
  QString quoted = value;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}

int writeCsv(const QAbstractItemModel& model, QIODevice& out, int role) {
  const int columns = model.columnCount();
  auto writeLine = [&out](const QStringList& fields) {
    const QByteArray line = (fields.join(QLatin1Char(',')) + QStringLiteral("\r\n")).toUtf8();
    return out.write(line) == line.size();
  };
  QStringList header;
  for (int c = 0; c < columns; ++c) {
    header << csvField(model.headerData(c, Qt::Horizontal, Qt::DisplayRole).toString());
  }
  if (!writeLine(header)) return -1;
  const int rows = model.rowCount();
  for (int r = 0; r < rows; ++r) {
    QStringList fields;
    for (int c = 0; c < columns; ++c) {
      const QModelIndex index = model.index(r, c);
      QVariant value = model.data(index, role);
      if (!value.isValid()) value = model.data(index, Qt::DisplayRole);
      fields << csvField(value.toString());
    }
    if (!writeLine(fields)) return -1;
  }
  return rows;
}

}  // namespace idem::admin

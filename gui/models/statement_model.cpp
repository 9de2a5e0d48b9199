#include "models/statement_model.hpp"

#include <QBrush>
#include <QFont>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "models/sql_row.hpp"
#include "models/statement_line_result_sql.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// The count of lines to look at comes from the needs-person partial index alone, not from every
// line of every file.
std::string statementsSql() {
  // clang-format off
  return "SELECT s.id, s.gateway, s.format, s.file_name, "
         IDEM_SQL_MICROS("s.period_from") ", " IDEM_SQL_MICROS("s.period_to") ", s.final, "
         "s.line_count, s.new_lines, coalesce(n.lines, 0), " IDEM_SQL_MICROS("s.imported_at")
         ", s.imported_by FROM idem.statements AS s LEFT JOIN (SELECT statement_id, count(*) AS "
         "lines FROM idem.statement_lines WHERE result IN " + needsPersonResultsSql() +
         " GROUP BY statement_id) AS n ON n.statement_id = s.id"
         " ORDER BY s.imported_at DESC, s.id DESC LIMIT $1";
  // clang-format on
}

QString minutes(Timestamp t) {
  return toDateTime(t).toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

}  // namespace

QString periodText(const std::optional<Timestamp>& from, const std::optional<Timestamp>& to) {
  if (!from || !to) return QStringLiteral("(no period)");
  return minutes(*from) + QStringLiteral(" \u2013 ") + minutes(*to);
}

std::vector<StatementFile> readStatements(pqxx::connection& c, int limit) {
  return idem::translatingErrors("read the statements", [&] {
    std::vector<StatementFile> rows;
    pqxx::read_transaction tx(c);
    for (const pqxx::row& f : tx.exec_params(statementsSql(), limit)) {
      StatementFile s;
      s.id = f[0].as<std::int64_t>();
      s.gateway = f[1].c_str();
      s.format = f[2].c_str();
      s.fileName = f[3].c_str();
      s.periodFrom = optionalMicros(f[4]);
      s.periodTo = optionalMicros(f[5]);
      s.final = f[6].as<bool>();
      s.lineCount = f[7].as<std::int64_t>();
      s.newLines = f[8].as<std::int64_t>();
      s.needsPerson = f[9].as<std::int64_t>();
      s.importedAt = micros(f[10]);
      s.importedBy = f[11].c_str();
      rows.push_back(std::move(s));
    }
    tx.commit();
    return rows;
  });
}

int StatementModel::rowOfId(std::int64_t id) const {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

QVariant StatementModel::display(const StatementFile& s, int column) const {
  switch (column) {
    case Gateway:
      return fromUtf8(s.gateway);
    case Format:
      return fromUtf8(s.format);
    case File:
      return fromUtf8(s.fileName);
    case Period:
      return periodText(s.periodFrom, s.periodTo);
    case Final:
      return s.final ? QStringLiteral("final") : QStringLiteral("not final");
    case Lines:
      return static_cast<qlonglong>(s.lineCount);
    case NewLines:
      return static_cast<qlonglong>(s.newLines);
    case NeedsPerson:
      return static_cast<qlonglong>(s.needsPerson);
    case ImportedAt:
      return displayTime(s.importedAt);
    case ImportedBy:
      return fromUtf8(s.importedBy);
    default:
      return {};
  }
}

QVariant StatementModel::cellData(const StatementFile& s, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(s, column);
    case ExportRole:
      if (column == Period) {
        return s.periodFrom && s.periodTo
                   ? isoTime(*s.periodFrom) + QLatin1Char('/') + isoTime(*s.periodTo)
                   : QString();
      }
      if (column == ImportedAt) return isoTime(s.importedAt);
      if (column == Final) return s.final;
      return display(s, column);
    case Qt::ToolTipRole:
      if (column == Period && s.periodFrom && s.periodTo) {
        return QStringLiteral("[%1, %2)").arg(isoTime(*s.periodFrom), isoTime(*s.periodTo));
      }
      if (column == Final) {
        return s.final ? QStringLiteral(
                             "The gateway declares this period final: its lines are all it did")
                       : QStringLiteral("Not final: more lines for this period may come");
      }
      if (column == ImportedAt) return isoTime(s.importedAt);
      if (column == File) return fromUtf8(s.fileName);
      return {};
    case Qt::ForegroundRole:
      if (column == NeedsPerson && s.needsPerson > 0) return QBrush(toneColor(Tone::NeedsPerson));
      return {};
    case Qt::FontRole:
      if (column == NeedsPerson && s.needsPerson > 0) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Lines || column == NewLines || column == NeedsPerson) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    case StatementIdRole:
      return static_cast<qlonglong>(s.id);
    default:
      return {};
  }
}

}  // namespace idem::admin

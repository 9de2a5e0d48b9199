// The gateway's statement files as they were imported (idem.statements,
// sql/migrations/015_gateway_evidence.sql): which gateway, format and file, the period it covers
// and whether the gateway declares it final, how many lines it held and how many no earlier file
// had, who imported it and when. Newest first; a file is imported once, so rows never change but
// by arriving.
#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

struct StatementFile {
  std::int64_t id = 0;
  std::string gateway;
  std::string format;
  std::string fileName;
  std::optional<Timestamp> periodFrom;  // [from, to); both empty when the file gave none
  std::optional<Timestamp> periodTo;
  bool final = false;
  std::int64_t lineCount = 0;
  std::int64_t newLines = 0;
  std::int64_t needsPerson = 0;  // its lines a person must look at
  Timestamp importedAt{};
  std::string importedBy;

  bool operator==(const StatementFile&) const = default;
};

// The newest `limit` files, newest import first.
std::vector<StatementFile> readStatements(pqxx::connection& c, int limit);

class StatementModel : public KeyedRowsModel<StatementFile, std::int64_t> {
  Q_OBJECT

 public:
  enum Columns {
    Gateway,
    Format,
    File,
    Period,
    Final,
    Lines,
    NewLines,
    NeedsPerson,
    ImportedAt,
    ImportedBy,
    ColumnCount
  };
  static constexpr auto kTitles =
      columnTitles<ColumnCount>("Gateway", "Format", "File", "Period", "Final", "Lines",
                                "New lines", "To look at", "Imported at", "Imported by");
  enum Roles {
    StatementIdRole = Qt::UserRole,  // qlonglong: idem.statements.id
    ExportRole,                      // exact value for CSV: ISO timestamps
  };

  // Files read at most; the oldest beyond it are left out (a year of daily files per gateway).
  static constexpr int kLimit = 2000;

  using KeyedRowsModel::KeyedRowsModel;

  void setStatements(std::vector<StatementFile> rows) { replaceRows(std::move(rows)); }
  int rowOfId(std::int64_t id) const;

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const StatementFile& s, int column, int role) const override;
  std::int64_t keyOf(const StatementFile& s) const override { return s.id; }
  bool sameContent(const StatementFile& a, const StatementFile& b) const override { return a == b; }

 private:
  QVariant display(const StatementFile& s, int column) const;
};

// "2026-12-01 00:00 – 2026-12-02 00:00", local time; "(no period)" when the file gave none.
QString periodText(const std::optional<Timestamp>& from, const std::optional<Timestamp>& to);

}  // namespace idem::admin

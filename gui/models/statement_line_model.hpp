// The statement lines a person must look at (result mismatched, unmatched or duplicate:
// idem::needsPerson), of one file or of all, newest first, loaded a page at a time by keyset on
// the line's id (never OFFSET): the partial index statement_lines_needs_person serves them however
// long the history grows. Each line with the sentence matching wrote for it (detail), its amount
// in major units, its references and the record it concerns, if any.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "idem/vocabulary.hpp"
#include "models/keyed_rows_model.hpp"
#include "models/request_tracker.hpp"

namespace idem::admin {

class DatabaseSession;

struct StatementLine {
  std::int64_t id = 0;  // idem.statement_lines.id
  std::string gateway;
  std::string lineId;  // the gateway's own id of the line
  std::int64_t statementId = 0;
  std::string fileName;
  std::int64_t sourceLine = 0;
  std::string category;
  StatementLineResult result = StatementLineResult::Unmatched;
  std::optional<FundFlowKind> kind;
  std::int64_t amountMinor = 0;
  std::string currency;
  std::optional<Timestamp> bookedAt;
  std::string gatewayRef;
  std::string idempotencyKey;
  std::string bizId;
  std::string recordKey;  // the record matching found, if any
  std::string detail;

  bool operator==(const StatementLine&) const = default;
};

struct StatementLinePage {
  std::vector<StatementLine> lines;
  bool hasMore = false;
  bool isWindow = false;  // a refresh of everything loaded, not a next page
};

// The lines to look at, newest first: of `statementId` (empty: of every file), below the id
// `before` (empty: from the newest), at most `limit`.
StatementLinePage readLinesToLookAt(pqxx::connection& c, std::optional<std::int64_t> statementId,
                                    std::optional<std::int64_t> before, int limit);
// Everything down to the id `through`, for a refresh in place.
StatementLinePage readLinesWindow(pqxx::connection& c, std::optional<std::int64_t> statementId,
                                  std::int64_t through, int limit);

class StatementLineModel : public KeyedRowsModel<StatementLine, std::int64_t> {
  Q_OBJECT

 public:
  enum Columns {
    Result,
    Gateway,
    Booked,
    Amount,
    Kind,
    Reference,
    Key,
    BizId,
    Line,
    Detail,
    ColumnCount
  };
  static constexpr auto kTitles =
      columnTitles<ColumnCount>("Result", "Gateway", "Booked", "Amount", "Kind", "Gateway ref",
                                "Idempotency key", "Biz id", "File, line", "What matching found");
  enum Roles {
    LineIdRole = Qt::UserRole,  // qlonglong: idem.statement_lines.id
    ResultRole,                 // int: idem::StatementLineResult
    ExportRole,
  };

  explicit StatementLineModel(DatabaseSession* session, QObject* parent = nullptr);

  bool canFetchMore(const QModelIndex& parent) const override;
  void fetchMore(const QModelIndex& parent) override;

  // The lines of this file (empty: of all); drops what is loaded and reads the first page.
  void setStatement(std::optional<std::int64_t> statementId);
  std::optional<std::int64_t> statement() const { return statementId_; }
  void setPageSize(int rows) { pageSize_ = rows; }
  // Re-reads the loaded lines in place; the first page when none is loaded.
  void refresh();

  bool isLoading() const { return loading_; }
  const QString& lastError() const { return lastError_; }
  const StatementLine* lineAt(int row) const { return rowAt(row); }

 signals:
  void fetched();
  void fetchFailed(const QString& message);

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const StatementLine& l, int column, int role) const override;
  std::int64_t keyOf(const StatementLine& l) const override { return l.id; }
  bool sameContent(const StatementLine& a, const StatementLine& b) const override { return a == b; }

 private:
  template <typename Fetch>
  void request(const char* what, Fetch fetch);
  void onPage(const StatementLinePage& page);
  QVariant display(const StatementLine& l, int column) const;

  DatabaseSession* session_;
  RequestTracker pages_;
  std::optional<std::int64_t> statementId_;
  int pageSize_ = 200;
  bool loading_ = false;
  bool hasMore_ = false;
  bool applying_ = false;
  QString lastError_;
};

// "unmatched": what the result means to the operator, for tooltips and the legend.
QString resultMeaning(StatementLineResult result);

}  // namespace idem::admin

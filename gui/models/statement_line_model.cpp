#include "models/statement_line_model.hpp"

#include <QBrush>
#include <QFont>
#include <algorithm>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "models/database_session.hpp"
#include "models/money_text.hpp"
#include "models/sql_row.hpp"
#include "models/statement_line_result_sql.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// $1 the file (NULL: all), $2 the keyset bound, $3 the limit. `bound` is the comparison with $2.
std::string linesSql(const char* bound) {
  // clang-format off
  return "SELECT l.id, l.gateway, l.line_id, l.statement_id, s.file_name, l.source_line, "
         "l.category, l.result, l.flow_kind, l.amount_minor, l.currency, "
         IDEM_SQL_MICROS("l.booked_at") ", l.gateway_ref, l.idempotency_key, l.biz_id, "
         "l.record_key, l.detail FROM idem.statement_lines AS l JOIN idem.statements AS s "
         "ON s.id = l.statement_id WHERE l.result IN " + needsPersonResultsSql() +
         " AND ($1::bigint IS NULL OR l.statement_id = $1) AND ($2::bigint IS NULL OR l.id " +
         bound + " $2) ORDER BY l.id DESC LIMIT $3";
  // clang-format on
}

StatementLine lineOf(const pqxx::row& f) {
  StatementLine l;
  l.id = f[0].as<std::int64_t>();
  l.gateway = f[1].c_str();
  l.lineId = f[2].c_str();
  l.statementId = f[3].as<std::int64_t>();
  l.fileName = f[4].c_str();
  l.sourceLine = f[5].as<std::int64_t>();
  l.category = f[6].c_str();
  l.result = idem::parse<StatementLineResult>(f[7].c_str());
  if (!f[8].is_null()) l.kind = idem::parse<FundFlowKind>(f[8].c_str());
  l.amountMinor = f[9].as<std::int64_t>();
  l.currency = f[10].c_str();
  l.bookedAt = optionalMicros(f[11]);
  l.gatewayRef = textOrEmpty(f[12]);
  l.idempotencyKey = textOrEmpty(f[13]);
  l.bizId = textOrEmpty(f[14]);
  l.recordKey = textOrEmpty(f[15]);
  l.detail = f[16].c_str();
  return l;
}

StatementLinePage readLines(pqxx::connection& c, const char* bound,
                            std::optional<std::int64_t> statementId, std::optional<std::int64_t> at,
                            int limit, bool window) {
  return idem::translatingErrors("read the statement lines", [&] {
    StatementLinePage page;
    page.isWindow = window;
    pqxx::read_transaction tx(c);
    const pqxx::result rows = tx.exec_params(linesSql(bound), statementId, at, limit + 1);
    for (const pqxx::row& f : rows) page.lines.push_back(lineOf(f));
    page.hasMore = static_cast<int>(page.lines.size()) > limit;
    if (page.hasMore) page.lines.pop_back();
    tx.commit();
    return page;
  });
}

}  // namespace

StatementLinePage readLinesToLookAt(pqxx::connection& c, std::optional<std::int64_t> statementId,
                                    std::optional<std::int64_t> before, int limit) {
  return readLines(c, "<", statementId, before, limit, false);
}

StatementLinePage readLinesWindow(pqxx::connection& c, std::optional<std::int64_t> statementId,
                                  std::int64_t through, int limit) {
  StatementLinePage page = readLines(c, ">=", statementId, through, limit, true);
  // Cut at the window's end: whether more lies below is the next page's question.
  page.hasMore = true;
  return page;
}

QString resultMeaning(StatementLineResult result) {
  switch (result) {
    case StatementLineResult::Matched:
      return QStringLiteral("A record explains it");
    case StatementLineResult::Mismatched:
      return QStringLiteral(
          "A record has its reference, but the amount, the currency or the kind disagrees: a "
          "person decides");
    case StatementLineResult::Unmatched:
      return QStringLiteral(
          "Money the gateway moved that no record explains (or that more than one record "
          "could): see the proposed matches");
    case StatementLineResult::Duplicate:
      return QStringLiteral(
          "A second side effect for a business object that had one: money moved twice, refund "
          "it");
    case StatementLineResult::NotAFlow:
      return QStringLiteral("A fee, a payout or a transfer: no business object's side effect");
    case StatementLineResult::Pending:
      return QStringLiteral("Not booked yet: decides nothing");
  }
  return {};
}

StatementLineModel::StatementLineModel(DatabaseSession* session, QObject* parent)
    : KeyedRowsModel(parent), session_(session), pages_(this) {}

bool StatementLineModel::canFetchMore(const QModelIndex& parent) const {
  return !parent.isValid() && hasMore_ && !loading_ && !applying_;
}

void StatementLineModel::fetchMore(const QModelIndex& parent) {
  if (!canFetchMore(parent) || rows_.empty()) return;
  request("read the statement lines",
          [file = statementId_, before = rows_.back().id, limit = pageSize_](pqxx::connection& c) {
            return readLinesToLookAt(c, file, before, limit);
          });
}

void StatementLineModel::setStatement(std::optional<std::int64_t> statementId) {
  pages_.cancel();
  loading_ = false;
  hasMore_ = false;
  resetRows();
  statementId_ = statementId;
  refresh();
}

void StatementLineModel::refresh() {
  if (loading_ || session_->state() == ConnectionState::Closed) return;
  if (rows_.empty()) {
    request("read the statement lines",
            [file = statementId_, limit = pageSize_](pqxx::connection& c) {
              return readLinesToLookAt(c, file, std::nullopt, limit);
            });
    return;
  }
  // The loaded span, plus room for the lines imported above it since.
  const int limit = static_cast<int>(rows_.size()) + std::max(pageSize_, 1000);
  request("refresh the statement lines",
          [file = statementId_, through = rows_.back().id, limit](pqxx::connection& c) {
            return readLinesWindow(c, file, through, limit);
          });
}

template <typename Fetch>
void StatementLineModel::request(const char* what, Fetch fetch) {
  loading_ = true;
  session_->submit(
      pages_, what, std::move(fetch), [this](const StatementLinePage& page) { onPage(page); },
      [this](const RequestError& error) {
        loading_ = false;
        lastError_ = QString::fromStdString(error.what());
        emit fetchFailed(lastError_);
      });
}

void StatementLineModel::onPage(const StatementLinePage& page) {
  loading_ = false;
  lastError_.clear();
  hasMore_ = page.hasMore;
  applying_ = true;
  if (page.isWindow) {
    replaceRows(page.lines);
  } else {
    appendRows(page.lines);
  }
  applying_ = false;
  emit fetched();
}

QVariant StatementLineModel::display(const StatementLine& l, int column) const {
  switch (column) {
    case Result:
      return fromUtf8(format(l.result));
    case Gateway:
      return fromUtf8(l.gateway);
    case Booked:
      return l.bookedAt ? displayTime(*l.bookedAt) : QString();
    case Amount:
      return moneyText(l.amountMinor, l.currency);
    case Kind:
      return l.kind ? fromUtf8(format(*l.kind)) : fromUtf8(l.category);
    case Reference:
      return fromUtf8(l.gatewayRef);
    case Key:
      return fromUtf8(l.idempotencyKey.empty() ? l.recordKey : l.idempotencyKey);
    case BizId:
      return fromUtf8(l.bizId);
    case Line:
      return QStringLiteral("%1:%2").arg(fromUtf8(l.fileName)).arg(l.sourceLine);
    case Detail:
      return fromUtf8(l.detail);
    default:
      return {};
  }
}

QVariant StatementLineModel::cellData(const StatementLine& l, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(l, column);
    case ExportRole:
      if (column == Booked) return l.bookedAt ? isoTime(*l.bookedAt) : QString();
      if (column == Amount) return static_cast<qlonglong>(l.amountMinor);
      return display(l, column);
    case Qt::ToolTipRole:
      switch (column) {
        case Result:
          return resultMeaning(l.result);
        case Booked:
          return l.bookedAt ? isoTime(*l.bookedAt) : QStringLiteral("the file gave no time");
        case Key:
          return l.idempotencyKey.empty() && !l.recordKey.empty()
                     ? QStringLiteral("the record matching found: %1").arg(fromUtf8(l.recordKey))
                     : fromUtf8(l.idempotencyKey);
        case Line:
          return QStringLiteral("line %1 of %2 (statement #%3), the gateway's line id %4")
              .arg(l.sourceLine)
              .arg(fromUtf8(l.fileName))
              .arg(l.statementId)
              .arg(fromUtf8(l.lineId));
        case Detail:
        case Reference:
        case BizId:
          return display(l, column);
        default:
          return {};
      }
    case Qt::ForegroundRole:
      if (column == Result) {
        return QBrush(toneColor(l.result == StatementLineResult::Duplicate ? Tone::Alarm
                                                                           : Tone::NeedsPerson));
      }
      return {};
    case Qt::FontRole:
      if (column == Result) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Amount) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case LineIdRole:
      return static_cast<qlonglong>(l.id);
    case ResultRole:
      return static_cast<int>(l.result);
    default:
      return {};
  }
}

}  // namespace idem::admin

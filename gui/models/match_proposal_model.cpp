#include "models/match_proposal_model.hpp"

#include <QBrush>
#include <QFont>
#include <QJsonDocument>
#include <QJsonObject>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "idem/vocabulary.hpp"
#include "models/age_text.hpp"
#include "models/money_text.hpp"
#include "models/sql_row.hpp"
#include "models/statement_line_model.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// $1 the line, $2 the window, $3 the limit, $4 'unmatched', $5 'effect'. Amount and currency are
// compared as idem.match_gateway_line compares them with the request.
// clang-format off
constexpr const char* kProposals =
    "SELECT r.idempotency_key, r.biz_type, r.biz_id, r.status, r.version, "
    IDEM_SQL_MICROS("r.created_at") ", " IDEM_SQL_MICROS("r.lease_expires_at") ", "
    "l.amount_minor, l.currency, extract(epoch FROM r.created_at - l.booked_at)::bigint "
    "FROM idem.statement_lines AS l "
    "JOIN idem.gateways AS g ON g.gateway = l.gateway "
    "JOIN idem.records AS r "
    "  ON cardinality(g.biz_types) = 0 OR r.biz_type = ANY (g.biz_types) "
    "WHERE l.id = $1 AND l.result = $4 AND l.flow_kind IS NOT NULL AND l.booked_at IS NOT NULL "
    "  AND r.created_at BETWEEN l.booked_at - $2::interval AND l.booked_at + $2::interval "
    "  AND idem.is_stuck(r.status, r.lease_expires_at) "
    "  AND idem.request_amount_minor(r.request_payload) = l.amount_minor "
    "  AND upper(r.request_payload ->> 'currency') = l.currency "
    "  AND idem.side_effect_role(r.biz_type, l.flow_kind) = $5 "
    "  AND NOT idem.side_effect_recorded(r.biz_type, r.biz_id, r.idempotency_key) "
    "ORDER BY abs(extract(epoch FROM r.created_at - l.booked_at)), r.idempotency_key "
    "LIMIT $3";
// clang-format on

}  // namespace

std::vector<MatchProposal> readProposals(pqxx::connection& c, std::int64_t lineId,
                                         std::chrono::seconds window, int limit) {
  return idem::translatingErrors("read the proposed matches", [&] {
    std::vector<MatchProposal> rows;
    pqxx::read_transaction tx(c);
    for (const pqxx::row& f : tx.exec_params(kProposals, lineId, intervalText(window), limit,
                                             std::string(format(StatementLineResult::Unmatched)),
                                             std::string(format(SideEffectRole::Effect)))) {
      MatchProposal p;
      p.lineId = lineId;
      p.key = f[0].c_str();
      p.bizType = f[1].c_str();
      p.bizId = f[2].c_str();
      p.status = idem::parse<RecordStatus>(f[3].c_str());
      p.version = f[4].as<int>();
      p.createdAt = micros(f[5]);
      p.leaseExpiresAt = optionalMicros(f[6]);
      p.amountMinor = f[7].as<std::int64_t>();
      p.currency = f[8].c_str();
      p.fromBooking = std::chrono::seconds(f[9].as<long long>());
      rows.push_back(std::move(p));
    }
    tx.commit();
    return rows;
  });
}

EvidenceInput proposalEvidence(const StatementLine& line) {
  QJsonObject object;
  object.insert(QStringLiteral("source"), fromUtf8(format(EvidenceSource::Statement)));
  object.insert(QStringLiteral("gateway"), fromUtf8(line.gateway));
  object.insert(QStringLiteral("statement_id"), static_cast<qint64>(line.statementId));
  object.insert(QStringLiteral("line_id"), fromUtf8(line.lineId));
  object.insert(QStringLiteral("file"), fromUtf8(line.fileName));
  object.insert(QStringLiteral("source_line"), static_cast<qint64>(line.sourceLine));
  object.insert(QStringLiteral("accepted_proposal"), true);
  return {fromUtf8(line.gatewayRef),
          QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact))};
}

QString fromBookingText(std::chrono::seconds offset) {
  const bool before = offset.count() < 0;
  const auto magnitude = std::chrono::microseconds(before ? -offset : offset);
  if (magnitude < std::chrono::seconds(1)) return QStringLiteral("at the booking");
  return QStringLiteral("%1 %2 the booking")
      .arg(ageText(magnitude), before ? QStringLiteral("before") : QStringLiteral("after"));
}

void MatchProposalModel::setProposals(std::vector<MatchProposal> rows) {
  std::erase_if(rows, [this](const MatchProposal& p) { return isRejected(p.lineId, p.key); });
  replaceRows(std::move(rows));
}

void MatchProposalModel::reject(int row) {
  const MatchProposal* p = rowAt(row);
  if (p == nullptr) return;
  rejected_.emplace(p->lineId, p->key);
  std::vector<MatchProposal> rest = rows_;
  setProposals(std::move(rest));
}

bool MatchProposalModel::isRejected(std::int64_t lineId, const std::string& key) const {
  return rejected_.count({lineId, key}) != 0;
}

QVariant MatchProposalModel::display(const MatchProposal& p, int column) const {
  switch (column) {
    case Key:
      return fromUtf8(p.key);
    case BizType:
      return fromUtf8(p.bizType);
    case BizId:
      return fromUtf8(p.bizId);
    case Status:
      return fromUtf8(format(p.status));
    case Amount:
      return moneyText(p.amountMinor, p.currency);
    case Created:
      return displayTime(p.createdAt);
    case FromBooking:
      return fromBookingText(p.fromBooking);
    default:
      return {};
  }
}

QVariant MatchProposalModel::cellData(const MatchProposal& p, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(p, column);
    case ExportRole:
      if (column == Created) return isoTime(p.createdAt);
      if (column == Amount) return static_cast<qlonglong>(p.amountMinor);
      if (column == FromBooking) return static_cast<qlonglong>(p.fromBooking.count());
      return display(p, column);
    case Qt::ToolTipRole:
      if (column == Created) return isoTime(p.createdAt);
      if (column == Key || column == BizId) return display(p, column);
      if (column == Status && p.status == RecordStatus::Processing && p.leaseExpiresAt) {
        return QStringLiteral("PROCESSING, its lease ended %1").arg(isoTime(*p.leaseExpiresAt));
      }
      return {};
    case Qt::BackgroundRole:
      if (column == Status) return QBrush(statusBackground(p.status));
      return {};
    case Qt::ForegroundRole:
      if (column == Status) return QBrush(statusForeground(p.status));
      return {};
    case Qt::FontRole:
      if (column == Status) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Amount) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      if (column == Status) return QVariant::fromValue(Qt::AlignCenter);
      return {};
    case KeyRole:
      return fromUtf8(p.key);
    default:
      return {};
  }
}

}  // namespace idem::admin

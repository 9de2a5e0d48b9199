#include "models/reconciliation_model.hpp"

#include <QBrush>
#include <algorithm>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"
#include "models/money_text.hpp"
#include "models/sql_row.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// Every biz type (IDEM_SQL_EVERY_BIZ_TYPE): the console answers for all of them.
// clang-format off
constexpr const char* kMovedWithoutSuccess =
    "SELECT biz_type, biz_id, first_charge_id, " IDEM_SQL_MICROS("first_charge_at") ", "
    "first_charge_ref, charges, charged_minor, currency, record_key, record_status, "
    "record_version, " IDEM_SQL_MICROS("record_lease_expires_at")
    " FROM idem.money_moved_without_success(" IDEM_SQL_EVERY_BIZ_TYPE ", $1::interval, "
    "$2::interval)";

constexpr const char* kSuccessWithoutMoney =
    "SELECT biz_type, biz_id, idempotency_key, version, " IDEM_SQL_MICROS("succeeded_at") ", "
    "agent_id FROM idem.success_without_money_moved(" IDEM_SQL_EVERY_BIZ_TYPE ", $1::interval, "
    "$2::interval)";
// clang-format on

}  // namespace

std::string ReconciliationRow::identity() const {
  if (question == MoneyQuestion::MovedWithoutSuccess) return "moved\x1f" + bizType + "\x1f" + bizId;
  return "success\x1f" + recordKey.value_or(std::string());
}

std::vector<ReconciliationRow> readReconciliation(pqxx::connection& c,
                                                  const ReconciliationWindow& window) {
  return idem::translatingErrors("read the money questions", [&] {
    std::vector<ReconciliationRow> rows;
    pqxx::read_transaction tx(c);
    const std::string span = intervalText(window.window);
    const std::string grace = intervalText(window.grace);
    for (const pqxx::row& f : tx.exec_params(kMovedWithoutSuccess, span, grace)) {
      ReconciliationRow r;
      r.question = MoneyQuestion::MovedWithoutSuccess;
      r.bizType = f[0].c_str();
      r.bizId = f[1].c_str();
      if (!f[2].is_null()) r.firstChargeId = f[2].as<std::int64_t>();
      r.firstChargeAt = optionalMicros(f[3]);
      r.firstChargeRef = textOrEmpty(f[4]);
      r.charges = f[5].as<std::int64_t>();
      r.chargedMinor = f[6].as<std::int64_t>();
      r.currency = textOrEmpty(f[7]);
      r.recordKey = optionalText(f[8]);
      if (!f[9].is_null()) r.recordStatus = parse<RecordStatus>(f[9].c_str());
      if (!f[10].is_null()) r.recordVersion = f[10].as<int>();
      r.recordLeaseExpiresAt = optionalMicros(f[11]);
      rows.push_back(std::move(r));
    }
    for (const pqxx::row& f : tx.exec_params(kSuccessWithoutMoney, span, grace)) {
      ReconciliationRow r;
      r.question = MoneyQuestion::SuccessWithoutMoney;
      r.bizType = f[0].c_str();
      r.bizId = f[1].c_str();
      r.recordKey = f[2].c_str();
      r.recordStatus = RecordStatus::Success;
      r.recordVersion = f[3].as<int>();
      r.succeededAt = optionalMicros(f[4]);
      r.agentId = optionalText(f[5]);
      rows.push_back(std::move(r));
    }
    tx.commit();
    return rows;
  });
}

QString questionText(MoneyQuestion question) {
  return question == MoneyQuestion::MovedWithoutSuccess ? QStringLiteral("money moved, no SUCCESS")
                                                        : QStringLiteral("SUCCESS, no money moved");
}

int ReconciliationModel::count(MoneyQuestion question) const {
  return static_cast<int>(
      std::count_if(rows_.begin(), rows_.end(),
                    [&](const ReconciliationRow& r) { return r.question == question; }));
}

QVariant ReconciliationModel::display(const ReconciliationRow& r, int column) const {
  const bool moved = r.question == MoneyQuestion::MovedWithoutSuccess;
  switch (column) {
    case Question:
      return questionText(r.question);
    case BizType:
      return fromUtf8(r.bizType);
    case BizId:
      return fromUtf8(r.bizId);
    case Status:
      return r.recordStatus ? fromUtf8(format(*r.recordStatus)) : QStringLiteral("no record");
    case Key:
      return r.recordKey ? fromUtf8(*r.recordKey) : QString();
    case Version:
      return r.recordVersion ? QVariant(*r.recordVersion) : QVariant(QString());
    case Charged:
      return moved ? moneyText(r.chargedMinor, r.currency) : QString();
    case Charges:
      return moved ? QVariant(static_cast<qlonglong>(r.charges)) : QVariant(QString());
    case GatewayRef:
      return fromUtf8(r.firstChargeRef);
    case At: {
      const std::optional<Timestamp> at = moved ? r.firstChargeAt : r.succeededAt;
      return at ? displayTime(*at) : QString();
    }
    case Agent:
      return r.agentId ? fromUtf8(*r.agentId) : QString();
    default:
      return {};
  }
}

QVariant ReconciliationModel::cellData(const ReconciliationRow& r, int column, int role) const {
  const bool moved = r.question == MoneyQuestion::MovedWithoutSuccess;
  switch (role) {
    case Qt::DisplayRole:
      return display(r, column);
    case ExportRole: {
      const std::optional<Timestamp> at = moved ? r.firstChargeAt : r.succeededAt;
      if (column == At) return at ? isoTime(*at) : QString();
      if (column == Charged && moved) return static_cast<qlonglong>(r.chargedMinor);
      return display(r, column);
    }
    case Qt::ToolTipRole:
      if (column == Question) {
        return moved ? QStringLiteral(
                           "A DEBIT or CAPTURE was recorded, and the business object has no "
                           "SUCCESS record (nor a SUCCESS tombstone): settle its record SUCCESS "
                           "with the charge as evidence")
                     : QStringLiteral(
                           "The record says SUCCESS, and no DEBIT or CAPTURE was recorded for its "
                           "business object: check the gateway");
      }
      if (column == At) {
        const std::optional<Timestamp> at = moved ? r.firstChargeAt : r.succeededAt;
        return at ? isoTime(*at) : QString();
      }
      return {};
    case Qt::BackgroundRole:
      if (column == Status && r.recordStatus) return QBrush(statusBackground(*r.recordStatus));
      return {};
    case Qt::ForegroundRole:
      if (column == Status && r.recordStatus) return QBrush(statusForeground(*r.recordStatus));
      if (column == Question) {
        return QBrush(toneColor(moved ? Tone::MoneyMoved : Tone::Warning));
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Charged || column == Charges || column == Version) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    case QuestionRole:
      return static_cast<int>(r.question);
    case RecordKeyRole:
      return r.recordKey ? fromUtf8(*r.recordKey) : QString();
    default:
      return {};
  }
}

}  // namespace idem::admin

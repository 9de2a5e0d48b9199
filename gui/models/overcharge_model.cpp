#include "models/overcharge_model.hpp"

#include <QBrush>
#include <QFont>
#include <QStringList>
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

// clang-format off
constexpr const char* kOvercharged =
    "SELECT biz_type, biz_id, currency, charges, charged_minor, refunded_minor, owed_minor, "
    "array_to_json(flow_ids)::text, array_to_json(idempotency_keys)::text, "
    "array_to_json(agent_ids)::text, " IDEM_SQL_MICROS("first_charge_at") ", "
    IDEM_SQL_MICROS("last_flow_at")
    " FROM idem.overcharged_objects(" IDEM_SQL_EVERY_BIZ_TYPE ", $1::interval)";
// clang-format on

QString joined(const std::vector<std::string>& values, const QString& prefix = {}) {
  QStringList parts;
  for (const std::string& v : values) parts << prefix + fromUtf8(v);
  return parts.join(QStringLiteral(", "));
}

}  // namespace

std::string Overcharge::identity() const {
  return bizType + "\x1f" + bizId + "\x1f" + currency;
}

std::vector<Overcharge> readOvercharges(pqxx::connection& c, std::chrono::seconds window) {
  return idem::translatingErrors("read the overcharged objects", [&] {
    std::vector<Overcharge> rows;
    pqxx::read_transaction tx(c);
    for (const pqxx::row& f : tx.exec_params(kOvercharged, intervalText(window))) {
      Overcharge o;
      o.bizType = f[0].c_str();
      o.bizId = f[1].c_str();
      o.currency = f[2].c_str();
      o.charges = f[3].as<std::int64_t>();
      o.chargedMinor = f[4].as<std::int64_t>();
      o.refundedMinor = f[5].as<std::int64_t>();
      o.owedMinor = f[6].as<std::int64_t>();
      o.flowIds = jsonArray(f[7]);
      o.idempotencyKeys = jsonArray(f[8]);
      o.agentIds = jsonArray(f[9]);
      o.firstChargeAt = micros(f[10]);
      o.lastFlowAt = micros(f[11]);
      rows.push_back(std::move(o));
    }
    tx.commit();
    return rows;
  });
}

QVariant OverchargeModel::display(const Overcharge& o, int column) const {
  switch (column) {
    case BizType:
      return fromUtf8(o.bizType);
    case BizId:
      return fromUtf8(o.bizId);
    case Owed:
      return moneyText(o.owedMinor, o.currency);
    case Charged:
      return moneyText(o.chargedMinor, o.currency);
    case Refunded:
      return moneyText(o.refundedMinor, o.currency);
    case Charges:
      return static_cast<qlonglong>(o.charges);
    case Flows:
      return joined(o.flowIds, QStringLiteral("#"));
    case Keys:
      return joined(o.idempotencyKeys);
    case Agents:
      return joined(o.agentIds);
    case FirstCharge:
      return displayTime(o.firstChargeAt);
    case LastFlow:
      return displayTime(o.lastFlowAt);
    default:
      return {};
  }
}

QVariant OverchargeModel::cellData(const Overcharge& o, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(o, column);
    case ExportRole:
      switch (column) {
        case Owed:
          return static_cast<qlonglong>(o.owedMinor);
        case Charged:
          return static_cast<qlonglong>(o.chargedMinor);
        case Refunded:
          return static_cast<qlonglong>(o.refundedMinor);
        case FirstCharge:
          return isoTime(o.firstChargeAt);
        case LastFlow:
          return isoTime(o.lastFlowAt);
        default:
          return display(o, column);
      }
    case Qt::ToolTipRole:
      if (column == Owed) {
        return QStringLiteral(
                   "%1 charged in %2 flows, %3 refunded: %4 beyond the first charge is owed "
                   "back. Record the REFUND flow and the row leaves this view.")
            .arg(moneyText(o.chargedMinor, o.currency))
            .arg(o.charges)
            .arg(moneyText(o.refundedMinor, o.currency), moneyText(o.owedMinor, o.currency));
      }
      if (column == FirstCharge) return isoTime(o.firstChargeAt);
      if (column == LastFlow) return isoTime(o.lastFlowAt);
      return {};
    case Qt::ForegroundRole:
      if (column == Owed) return QBrush(toneColor(Tone::Alarm));
      return {};
    case Qt::FontRole:
      if (column == Owed) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Owed || column == Charged || column == Refunded || column == Charges) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    case OwedMinorRole:
      return static_cast<qlonglong>(o.owedMinor);
    default:
      return {};
  }
}

}  // namespace idem::admin

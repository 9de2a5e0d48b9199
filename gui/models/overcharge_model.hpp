// Overcharged business objects (idem.overcharged_objects, sql/migrations/012_money_questions.sql):
// per object and currency, DEBIT and CAPTURE beyond the first charge plus REFUNDs, with the flows,
// keys and agents that made them. Resolved by the ledger alone: once a REFUND covers the excess the
// function stops returning the object and the next refresh removes its row.
#pragma once

#include <chrono>
#include <cstdint>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

struct Overcharge {
  std::string bizType;
  std::string bizId;
  std::string currency;
  std::int64_t charges = 0;
  std::int64_t chargedMinor = 0;
  std::int64_t refundedMinor = 0;
  std::int64_t owedMinor = 0;  // what the customer is owed back
  std::vector<std::string> flowIds;
  std::vector<std::string> idempotencyKeys;
  std::vector<std::string> agentIds;
  Timestamp firstChargeAt{};
  Timestamp lastFlowAt{};

  bool operator==(const Overcharge&) const = default;
  std::string identity() const;
};

// Objects charged within the last `window` of the server's clock.
std::vector<Overcharge> readOvercharges(pqxx::connection& c, std::chrono::seconds window);

class OverchargeModel : public KeyedRowsModel<Overcharge, std::string> {
  Q_OBJECT

 public:
  enum Columns {
    BizType,
    BizId,
    Owed,
    Charged,
    Refunded,
    Charges,
    Flows,
    Keys,
    Agents,
    FirstCharge,
    LastFlow,
    ColumnCount
  };
  static constexpr auto kTitles =
      columnTitles<ColumnCount>("Biz type", "Biz id", "Owed", "Charged", "Refunded", "Charges",
                                "Flows", "Idempotency keys", "Agents", "First charge", "Last flow");
  enum Roles { OwedMinorRole = Qt::UserRole, ExportRole };

  using KeyedRowsModel::KeyedRowsModel;

  void setOvercharges(std::vector<Overcharge> rows) { replaceRows(std::move(rows)); }

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const Overcharge& o, int column, int role) const override;
  std::string keyOf(const Overcharge& o) const override { return o.identity(); }
  bool sameContent(const Overcharge& a, const Overcharge& b) const override { return a == b; }

 private:
  QVariant display(const Overcharge& o, int column) const;
};

}  // namespace idem::admin

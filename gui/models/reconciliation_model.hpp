// The two money questions, one row per answer (sql/migrations/012_money_questions.sql): business
// objects whose money moved (a DEBIT or CAPTURE) without a SUCCESS record, and SUCCESS records
// whose business object shows no money moved, over a window of the server's clock that ends a grace
// period ago (the exporter's idempotency_reconciliation_mismatches, read from the same functions).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"

namespace idem::admin {

// The span both questions look at: [now - window, now - grace). The exporter's defaults.
struct ReconciliationWindow {
  std::chrono::seconds window = std::chrono::hours(24);
  std::chrono::seconds grace = std::chrono::minutes(5);
  bool operator==(const ReconciliationWindow&) const = default;
};

enum class MoneyQuestion { MovedWithoutSuccess, SuccessWithoutMoney };

struct ReconciliationRow {
  MoneyQuestion question = MoneyQuestion::MovedWithoutSuccess;
  std::string bizType;
  std::string bizId;
  // The record the row is about: for money moved, the object's most recently updated record (none
  // when no record was ever made); for SUCCESS without money, the SUCCESS record itself.
  std::optional<std::string> recordKey;
  std::optional<RecordStatus> recordStatus;
  std::optional<int> recordVersion;
  std::optional<Timestamp> recordLeaseExpiresAt;
  // Money moved: the first charge and the total.
  std::optional<std::int64_t> firstChargeId;
  std::optional<Timestamp> firstChargeAt;
  std::string firstChargeRef;
  std::int64_t charges = 0;
  std::int64_t chargedMinor = 0;
  std::string currency;
  // SUCCESS without money.
  std::optional<Timestamp> succeededAt;
  std::optional<std::string> agentId;

  bool operator==(const ReconciliationRow&) const = default;
  // One row per business object (money moved) or per SUCCESS record.
  std::string identity() const;
};

// Both questions, money moved first, each oldest first as the functions return them.
std::vector<ReconciliationRow> readReconciliation(pqxx::connection& c,
                                                  const ReconciliationWindow& window);

class ReconciliationModel : public KeyedRowsModel<ReconciliationRow, std::string> {
  Q_OBJECT

 public:
  enum Columns {
    Question,
    BizType,
    BizId,
    Status,
    Key,
    Version,
    Charged,
    Charges,
    GatewayRef,
    At,
    Agent,
    ColumnCount
  };
  static constexpr auto kTitles = columnTitles<ColumnCount>(
      "Question", "Biz type", "Biz id", "Record status", "Idempotency key", "Version", "Charged",
      "Charges", "First charge ref", "Charged / succeeded at", "Agent");
  enum Roles {
    QuestionRole = Qt::UserRole,  // int: MoneyQuestion
    RecordKeyRole,                // QString, empty when there is no record
    ExportRole,
  };

  using KeyedRowsModel::KeyedRowsModel;

  void setRows(std::vector<ReconciliationRow> rows) { replaceRows(std::move(rows)); }
  int count(MoneyQuestion question) const;

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const ReconciliationRow& r, int column, int role) const override;
  std::string keyOf(const ReconciliationRow& r) const override { return r.identity(); }
  bool sameContent(const ReconciliationRow& a, const ReconciliationRow& b) const override {
    return a == b;
  }

 private:
  QVariant display(const ReconciliationRow& r, int column) const;
};

QString questionText(MoneyQuestion question);

}  // namespace idem::admin

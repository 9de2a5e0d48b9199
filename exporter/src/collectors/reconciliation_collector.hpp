// Reconciliation: fund flows against records, for the biz types that move money, over
// --reconcile-window, each older than --reconcile-grace, on its own slower --reconcile-interval.
// Publishes idempotency_reconciliation_mismatches{kind}: debit_without_success (money moved, a
// DEBIT or CAPTURE flow, but the business object has no SUCCESS record, nor the tombstone of a
// purged one: what a blind retry turns into a double charge) and success_without_debit (a SUCCESS
// record with no DEBIT or CAPTURE flow). Both count business objects: the rows of the schema's
// idem.money_moved_without_success and idem.success_without_money_moved
// (sql/migrations/012_money_questions.sql), the one definition the admin app and the runbooks read
// too.
//
// On a schema older than migration 012 (an exporter that runs through an upgrade in place) the
// money questions do not exist yet: rather than answer them with a copy of their SQL that would
// drift, the reconciliation and overcharges collectors fail, each collection, with an error that
// names the migration (idempotency_exporter_collect_errors_total{stage}, the log), keep serving
// their last figures and their last-success timestamp, and answer again once 012 is applied.
#pragma once

#include <chrono>
#include <mutex>
#include <pqxx/transaction_base>
#include <string>
#include <vector>

#include "collectors/collector.hpp"
#include "exporter_options.hpp"

namespace idem::exporter {

struct ReconciliationSettings {
  std::chrono::milliseconds interval{60'000};
  std::chrono::milliseconds window{24 * 3600'000};
  std::chrono::milliseconds grace{5 * 60'000};
  std::vector<std::string> bizTypes;  // --reconcile-biz-types, whose default lives with the flag

  // --reconcile-interval, -window, -grace and -biz-types.
  static ReconciliationSettings from(const ExporterOptions& options);
};

// What the reconciliation and overcharges collectors share: the settings, the interval, the lock
// that guards what scrapes read, and the money questions' parameters in text form.
class MoneyQuestionCollector : public Collector {
 public:
  explicit MoneyQuestionCollector(ReconciliationSettings settings)
      : settings_(std::move(settings)) {}

  std::chrono::milliseconds interval() const override { return settings_.interval; }

 protected:
  // Throws, naming migration 012, when the schema lacks the money question `function` (its
  // signature, as to_regprocedure reads it).
  static void requireMoneyQuestion(pqxx::transaction_base& tx, const std::string& function);
  // '{"a","b"}', and --reconcile-window / -grace as interval text.
  std::string bizTypesParameter() const;
  std::string windowParameter() const;
  std::string graceParameter() const;

  const ReconciliationSettings settings_;
  mutable std::mutex mutex_;
};

class ReconciliationCollector : public MoneyQuestionCollector {
 public:
  using MoneyQuestionCollector::MoneyQuestionCollector;

  std::string_view name() const override { return "reconciliation"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  double debitWithoutSuccess_ = 0;
  double successWithoutDebit_ = 0;
  double lastSuccess_ = 0;
};

}  // namespace idem::exporter

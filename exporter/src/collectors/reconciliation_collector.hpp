// Reconciliation: fund flows against records, for the biz types that move money, over
// --reconcile-window, each older than --reconcile-grace, on its own slower --reconcile-interval.
// Publishes idempotency_reconciliation_mismatches{kind}: debit_without_success (money moved, a
// DEBIT or CAPTURE flow, but the business object has no SUCCESS record, nor the tombstone of a
// purged one: what a blind retry turns into a double charge) and success_without_debit (a SUCCESS
// record with no DEBIT or CAPTURE flow). Both count business objects.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "collectors/collector.hpp"

namespace idem::exporter {

struct ReconciliationSettings {
  std::chrono::milliseconds interval{60'000};
  std::chrono::milliseconds window{24 * 3600'000};
  std::chrono::milliseconds grace{5 * 60'000};
  std::vector<std::string> bizTypes;  // --reconcile-biz-types, whose default lives with the flag
};

class ReconciliationCollector : public Collector {
 public:
  explicit ReconciliationCollector(ReconciliationSettings settings);

  std::string_view name() const override { return "reconciliation"; }
  std::chrono::milliseconds interval() const override { return settings_.interval; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  ReconciliationSettings settings_;
  mutable std::mutex mutex_;
  double debitWithoutSuccess_ = 0;
  double successWithoutDebit_ = 0;
  double lastSuccess_ = 0;
};

// '{"a","b"}': a text[] parameter in text form, quoted so that any biz type is safe.
std::string textArrayLiteral(const std::vector<std::string>& values);

}  // namespace idem::exporter

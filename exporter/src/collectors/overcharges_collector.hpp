// Overcharges still owed to customers (docs/contract/metrics.md v2): for the biz types that move
// money (--reconcile-biz-types), over --reconcile-window, on the reconciliation's interval. A
// business object is overcharged when its DEBIT and CAPTURE flows exceed, in total amount, its
// first such flow plus its REFUND flows, within one currency: a duplicate charge nobody refunded
// yet; the rows of the schema's idem.overcharged_objects (sql/migrations/012_money_questions.sql).
// Publishes idempotency_overcharged_business_objects{biz_type} and
// idempotency_overcharged_amount_minor{biz_type,currency}. Unlike the duplicate counter, which
// only rises, both fall back to 0 once the refunds are recorded, so an alert on them resolves
// when the money is back; a currency's series, once seen, stays (at 0). Currencies are bounded
// (currencies.hpp): ISO 4217 codes, the first --max-currencies of them; any other is summed under
// currency="other". Before migration 012 it fails as the reconciliation does
// (reconciliation_collector.hpp).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "collectors/currencies.hpp"
#include "collectors/reconciliation_collector.hpp"

namespace idem::exporter {

class OverchargesCollector : public MoneyQuestionCollector {
 public:
  OverchargesCollector(ReconciliationSettings settings, std::size_t maxCurrencies);

  std::string_view name() const override { return "overcharges"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  std::map<std::string, double> objects_;                          // by biz type
  std::map<std::pair<std::string, std::string>, double> amounts_;  // by (biz type, currency)
  Currencies currencies_;                                          // collection thread only
};

}  // namespace idem::exporter

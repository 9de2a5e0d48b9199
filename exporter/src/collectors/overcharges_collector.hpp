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
//
// Like the reconciliation, a collection costs what the interval added: the collector keeps the
// overcharged objects of the window with what each still owes per currency, starts them from the
// definition in the snapshot in which its reader of fund_flows starts, and recomputes an object
// whenever a DEBIT, CAPTURE or REFUND of it arrives (the reader asks, in its statement, whether
// the object was charged more than once: idem.charged_objects, as the definition does). An object
// leaves when its latest charge leaves the window.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "collectors/currencies.hpp"
#include "collectors/reconciliation_collector.hpp"

namespace idem::exporter {

class OverchargesCollector : public MoneyQuestionCollector {
 public:
  OverchargesCollector(ReconciliationSettings settings, std::size_t maxCurrencies,
                       ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "overcharges"; }
  void update(pqxx::connection& connection) override;
  std::vector<IncrementalReader*> readers() override { return {&flows_}; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

  // The reader's rows-read and gap figures, by this name (self-health's table label).
  static constexpr const char* kFlowsTable = "overcharges_fund_flows";

 private:
  struct Owed {
    std::string bizType;
    double latestChargeAt = 0;
    std::map<std::string, double> byCurrency;  // > 0 only
  };
  void start(pqxx::connection& connection);
  // Recomputes the objects in dirty_ from their flows, in `tx`, kRecomputeChunk objects a
  // statement: the start's may be every object charged twice in days, and its memory is bounded.
  void recompute(pqxx::transaction_base& tx);
  static constexpr std::size_t kRecomputeChunk = 500;
  void publish(double now);

  IncrementalReader flows_;
  // Collection thread only: the objects that owe something, and those a flow touched since.
  std::map<ObjectKey, Owed> owed_;
  std::vector<ObjectKey> dirty_;

  std::map<std::string, double> objects_;                          // by biz type
  std::map<std::pair<std::string, std::string>, double> amounts_;  // by (biz type, currency)
  Currencies currencies_;                                          // collection thread only
};

}  // namespace idem::exporter

// Unsettled records: idem.records now PROCESSING or UNKNOWN, read through the records_unsettled
// partial index, so the cost follows the small unsettled set and not the table. Publishes
// idempotency_records{biz_type,status}, idempotency_stuck_records{biz_type} and
// idempotency_oldest_unsettled_age_seconds{status}. At its first update it also learns the biz
// types the tables already name (an index skip scan), so their series exist from the first scrape.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"

namespace idem::exporter {

class UnsettledRecordsCollector : public Collector {
 public:
  explicit UnsettledRecordsCollector(std::shared_ptr<BizTypes> bizTypes);

  std::string_view name() const override { return "unsettled_records"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  struct State {
    std::map<std::string, double> processing;  // by biz type
    std::map<std::string, double> unknown;
    std::map<std::string, double> stuck;
    double oldestProcessing = 0;
    double oldestUnknown = 0;
  };

  std::shared_ptr<BizTypes> bizTypes_;
  bool discovered_ = false;  // collection thread only
  mutable std::mutex mutex_;
  State state_;
};

}  // namespace idem::exporter

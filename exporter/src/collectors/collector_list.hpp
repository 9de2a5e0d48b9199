// The one list of collectors, and the prometheus::Collectable that serves them: a scrape asks
// every collector for its in-memory families, in this order. Adding a figure means adding a
// collector here, not editing a central switch.
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "collectors/reconciliation_collector.hpp"
#include "collectors/self_health_collector.hpp"
#include "incremental_reader.hpp"
#include "read_stats.hpp"

namespace idem::exporter {

struct CollectorSettings {
  ReaderLimits reader;  // window = --ratio-window
  ReconciliationSettings reconciliation;
  std::size_t maxBizTypes = 100;  // --max-biz-types
};

class CollectorSet : public prometheus::Collectable {
 public:
  explicit CollectorSet(const CollectorSettings& settings);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // In the order the collection loop runs them.
  const std::vector<std::unique_ptr<Collector>>& collectors() const { return collectors_; }
  SelfHealthCollector& health() { return *health_; }

 private:
  std::shared_ptr<BizTypes> bizTypes_;
  ReadStats readStats_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  SelfHealthCollector* health_ = nullptr;  // one of collectors_
};

}  // namespace idem::exporter

// The collectors that run, built from the registry (registry.hpp) and the options, and the
// prometheus::Collectable that serves them: a scrape asks every collector for its in-memory
// families, in collection order, self-health (always on) last.
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "collectors/self_health_collector.hpp"
#include "exporter_options.hpp"
#include "read_stats.hpp"

namespace idem::exporter {

class CollectorSet : public prometheus::Collectable {
 public:
  explicit CollectorSet(const ExporterOptions& options);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // In the order the collection loop runs them.
  const std::vector<std::unique_ptr<Collector>>& collectors() const { return collectors_; }
  SelfHealthCollector& health() { return *health_; }

 private:
  std::shared_ptr<BizTypes> bizTypes_;
  std::unique_ptr<ReadStats> readStats_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  SelfHealthCollector* health_ = nullptr;  // one of collectors_
};

}  // namespace idem::exporter

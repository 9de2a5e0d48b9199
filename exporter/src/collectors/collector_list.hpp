// The collectors that run, built from the registry (registry.hpp) and the options, and the
// prometheus::Collectable that serves them: a scrape asks every collector for its in-memory
// families, in collection order, self-health (always on) last.
#pragma once

#include <prometheus/collectable.h>

#include <memory>
#include <shared_mutex>
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

  // In the order the collection loop runs them. Collection thread only.
  const std::vector<std::unique_ptr<Collector>>& collectors() const { return collectors_; }
  SelfHealthCollector& health() { return *health_; }

  // Collection thread only. Every collector but self-health is built again, as at the
  // exporter's start: counters from zero (a reset, which rate() and increase() take), readers
  // started afresh on the server now behind the connection. For a server that lacks rows already
  // counted (CollectionLoop); self-health, the biz types and the rows-read figures go on.
  void restartCounts();

 private:
  std::vector<std::unique_ptr<Collector>> makeCollectors();

  ExporterOptions options_;
  std::shared_ptr<BizTypes> bizTypes_;
  std::unique_ptr<ReadStats> readStats_;
  std::vector<std::unique_ptr<Collector>> collectors_;  // swapped under collectorsMutex_
  mutable std::shared_mutex collectorsMutex_;
  SelfHealthCollector* health_ = nullptr;  // one of collectors_, the last
};

}  // namespace idem::exporter

// Requests: idem.attempts, one row per request that reached the idempotency layer. Publishes
// idempotency_requests_total{biz_type,source,outcome} and two of the three figures over
// --ratio-window: idempotency_hit_ratio and idempotency_retry_trigger_ratio{source}.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "collectors/vocabulary_cells.hpp"
#include "incremental_reader.hpp"
#include "sliding_window.hpp"

namespace idem::exporter {

class RequestsCollector : public Collector {
 public:
  RequestsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "requests"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  static constexpr std::size_t kSources = kValueCount<TriggerSource>;
  static constexpr std::size_t kOutcomes = kValueCount<Outcome>;
  using Cells = std::array<std::uint64_t, kSources * kOutcomes>;
  static constexpr std::size_t cell(TriggerSource s, Outcome o) {
    return cellOf(s) * kOutcomes + cellOf(o);
  }
  // Window counts: all requests, hits, then one per retry source (kRetrySources).
  static constexpr std::size_t kAll = 0, kHits = 1, kFirstRetry = 2;
  using Window = SlidingWindow<kFirstRetry + kRetrySources.size()>;

  void take(const pqxx::row& row, RowOrigin origin);
  void publish();

  std::shared_ptr<BizTypes> bizTypes_;
  IncrementalReader reader_;
  // Collection thread only.
  std::vector<Cells> counts_;  // by biz type index
  Window window_;

  mutable std::mutex mutex_;  // guards what scrapes read
  std::vector<Cells> publishedCounts_;
  double hitRatio_;
  std::array<double, kRetrySources.size()> retryRatio_;  // by retryIndexOf
};

}  // namespace idem::exporter

// Requests: idem.attempts, one row per request that reached the idempotency layer. Publishes
// idempotency_requests_total{biz_type,source,outcome} and two of the three figures over
// --ratio-window: idempotency_hit_ratio and idempotency_retry_trigger_ratio{source}.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "collectors/counting_collector.hpp"
#include "collectors/vocabulary_cells.hpp"

namespace idem::exporter {

// What a requests collector counts, named before the class because its base takes them.
namespace requests {
// Requests by biz type: one cell per source and outcome.
using Cells = std::array<std::uint64_t, kValueCount<TriggerSource> * kValueCount<Outcome>>;
constexpr std::size_t cell(TriggerSource s, Outcome o) {
  return cellOf(s) * kValueCount<Outcome> + cellOf(o);
}
// Window slots: all requests (kAll), hits, then one per retry source (kRetrySources).
inline constexpr std::size_t kHits = 1, kFirstRetry = 2;
inline constexpr std::size_t kWindowSlots = kFirstRetry + kRetrySources.size();
}  // namespace requests

class RequestsCollector : public CountingCollector<requests::Cells, requests::kWindowSlots> {
 public:
  RequestsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "requests"; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  void take(const pqxx::row& row, RowOrigin origin) override;
};

}  // namespace idem::exporter

// Fund flows: idem.fund_flows, the money ledger. Publishes idempotency_fund_flows_total and
// idempotency_duplicate_fund_flows_total{biz_type,kind}, and the third figure over --ratio-window:
// idempotency_duplicate_fund_flow_ratio. A flow is a duplicate when the database set its
// duplicate_of (an earlier flow of the same business object and kind exists).
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

class FundFlowsCollector : public Collector {
 public:
  FundFlowsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "fund_flows"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  static constexpr std::size_t kKinds = kValueCount<FundFlowKind>;
  struct Cells {
    std::array<std::uint64_t, kKinds> flows{};
    std::array<std::uint64_t, kKinds> duplicates{};
  };
  static constexpr std::size_t kAll = 0, kDuplicates = 1;
  using Window = SlidingWindow<2>;

  void take(const pqxx::row& row, RowOrigin origin);
  void publish();

  std::shared_ptr<BizTypes> bizTypes_;
  IncrementalReader reader_;
  std::vector<Cells> counts_;  // collection thread only, by biz type index
  Window window_;

  mutable std::mutex mutex_;
  std::vector<Cells> publishedCounts_;
  double duplicateRatio_;
};

}  // namespace idem::exporter

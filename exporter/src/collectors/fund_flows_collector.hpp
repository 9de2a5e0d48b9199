// Fund flows: idem.fund_flows, the money ledger. Publishes idempotency_fund_flows_total and
// idempotency_duplicate_fund_flows_total{biz_type,kind}, the third figure over --ratio-window:
// idempotency_duplicate_fund_flow_ratio, and who recorded the flows,
// idempotency_fund_flows_recorded_total{biz_type,recorded_by}. A flow is a duplicate when the
// database set its duplicate_of (an earlier flow of the same business object and kind exists).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "collectors/counting_collector.hpp"
#include "collectors/vocabulary_cells.hpp"

namespace idem::exporter {

// What a fund flows collector counts, named before the class because its base takes them.
namespace fund_flows {
// Who recorded a flow (schema contract v3): the claimant with its token, the gateway's side
// (idem_ledger), or nobody says (recorded before the rule).
inline constexpr std::array<std::string_view, 3> kRecorders{"claimant", "ledger", "legacy"};
// Fund flows by biz type: all and duplicates, one cell per kind; all, one cell per recorder.
struct Cells {
  std::array<std::uint64_t, kValueCount<FundFlowKind>> flows{};
  std::array<std::uint64_t, kValueCount<FundFlowKind>> duplicates{};
  std::array<std::uint64_t, kRecorders.size()> recorded{};
};
// Window slots: all flows (kAll), then duplicates.
inline constexpr std::size_t kDuplicates = 1;
inline constexpr std::size_t kWindowSlots = kDuplicates + 1;
}  // namespace fund_flows

class FundFlowsCollector : public CountingCollector<fund_flows::Cells, fund_flows::kWindowSlots> {
 public:
  FundFlowsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "fund_flows"; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  void take(const pqxx::row& row, RowOrigin origin) override;
};

}  // namespace idem::exporter

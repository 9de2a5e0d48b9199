#include "collectors/fund_flows_collector.hpp"

#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The columns take() reads after id, created_at and biz_type. The recorder is read out of the
// row's JSON, so that the same statement reads a ledger older than the column (schema contract v2
// and before), whose flows it counts as legacy.
constexpr const char* kColumns =
    "kind, duplicate_of IS NOT NULL, to_jsonb(fund_flows) ->> 'recorded_by'";

std::size_t recorderCell(const pqxx::field& field) {
  const std::string_view recorder = field.is_null() ? "legacy" : field.c_str();
  for (std::size_t i = 0; i < fund_flows::kRecorders.size(); ++i) {
    if (fund_flows::kRecorders[i] == recorder) return i;
  }
  return fund_flows::kRecorders.size() - 1;  // a value the schema does not know: not the rule's
}

}  // namespace

FundFlowsCollector::FundFlowsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits,
                                       ReadStats& stats)
    : CountingCollector(std::move(bizTypes), "fund_flows", kColumns, limits, stats) {}

void FundFlowsCollector::take(const pqxx::row& row, RowOrigin origin) {
  const auto kind = tryParse<FundFlowKind>(row[3].c_str());
  if (!kind) {
    logWarn(std::string("idem.fund_flows id ") + row[0].c_str() + ": unknown kind '" +
            row[3].c_str() + "', not counted");
    return;
  }
  const bool duplicate = row[4].as<bool>();
  if (fund_flows::Cells* cells = cellsFor(row, origin)) {
    const std::size_t k = cellOf(*kind);
    ++cells->flows[k];
    if (duplicate) ++cells->duplicates[k];
    ++cells->recorded[recorderCell(row[5])];
  }
  const double createdAt = row[1].as<double>();
  window().add(createdAt, kAll);
  if (duplicate) window().add(createdAt, fund_flows::kDuplicates);
}

void FundFlowsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto flows = makeFamily("idempotency_fund_flows_total",
                          "Fund flows recorded in idem.fund_flows since the exporter started, as "
                          "of the last collection.",
                          prometheus::MetricType::Counter);
  auto duplicates = makeFamily("idempotency_duplicate_fund_flows_total",
                               "Fund flows that duplicate an earlier flow of the same business "
                               "object and kind (money moved twice), since the exporter started, "
                               "as of the last collection.",
                               prometheus::MetricType::Counter);
  auto ratio = makeFamily("idempotency_duplicate_fund_flow_ratio",
                          "Share of fund flows over --ratio-window that duplicate an earlier flow "
                          "of the same business object and kind, as of the last collection; NaN "
                          "without fund flows.",
                          prometheus::MetricType::Gauge);
  auto recorded = makeFamily("idempotency_fund_flows_recorded_total",
                             "Fund flows by who recorded them since the exporter started, as of "
                             "the last collection: the claimant with its claim token, the "
                             "gateway's side (idem_ledger), or legacy (before schema contract v3).",
                             prometheus::MetricType::Counter);
  const Snapshot published = snapshot();
  for (const auto& [biz, cells] : published.byBizType) {
    for (FundFlowKind k : allValues<FundFlowKind>()) {
      const Labels labels{{"biz_type", biz}, {"kind", std::string(format(k))}};
      addSample(flows, labels, static_cast<double>(cells.flows[cellOf(k)]));
      addSample(duplicates, labels, static_cast<double>(cells.duplicates[cellOf(k)]));
    }
    for (std::size_t r = 0; r < fund_flows::kRecorders.size(); ++r) {
      addSample(recorded,
                {{"biz_type", biz}, {"recorded_by", std::string(fund_flows::kRecorders[r])}},
                static_cast<double>(cells.recorded[r]));
    }
  }
  addSample(ratio, {}, published.shares[fund_flows::kDuplicates]);
  out.push_back(std::move(flows));
  out.push_back(std::move(duplicates));
  out.push_back(std::move(ratio));
  out.push_back(std::move(recorded));
}

// The fund flows collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector(
    {.name = "fund_flows",
     .order = 30,
     .tables = {"fund_flows"},
     .make = [](const CollectorContext& c) {
       return std::make_unique<FundFlowsCollector>(c.bizTypes, c.reader, c.readStats);
     }});

}  // namespace idem::exporter

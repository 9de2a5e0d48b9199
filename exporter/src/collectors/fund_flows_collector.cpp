#include "collectors/fund_flows_collector.hpp"

#include <limits>
#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The columns take() reads after id and created_at.
constexpr const char* kColumns = "biz_type, kind, duplicate_of IS NOT NULL";

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

FundFlowsCollector::FundFlowsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits,
                                       ReadStats& stats)
    : bizTypes_(std::move(bizTypes)),
      reader_(tableQueries("idem.fund_flows", kColumns), limits, stats.table("fund_flows")),
      window_(limits.window),
      duplicateRatio_(kNaN) {}

void FundFlowsCollector::take(const pqxx::row& row, RowOrigin origin) {
  const auto kind = tryParse<FundFlowKind>(row[3].c_str());
  if (!kind) {
    logWarn(std::string("idem.fund_flows id ") + row[0].c_str() + ": unknown kind '" +
            row[3].c_str() + "', not counted");
    return;
  }
  const bool duplicate = row[4].as<bool>();
  bool overflow = false;
  const std::size_t biz = bizTypes_->intern(row[2].c_str(), &overflow);
  if (origin != RowOrigin::BeforeStart) {
    if (overflow) bizTypes_->countOverflow();
    if (counts_.size() <= biz) counts_.resize(biz + 1);
    const std::size_t k = cellOf(*kind);
    ++counts_[biz].flows[k];
    if (duplicate) ++counts_[biz].duplicates[k];
  }
  const double createdAt = row[1].as<double>();
  window_.add(createdAt, kAll);
  if (duplicate) window_.add(createdAt, kDuplicates);
}

void FundFlowsCollector::update(pqxx::connection& connection) {
  reader_.pollAndPublish(
      connection, [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); },
      [this] { publish(); });
}

void FundFlowsCollector::publish() {
  const Window::Counts w = window_.sum(reader_.snapshotTime());
  std::lock_guard lock(mutex_);
  publishedCounts_ = counts_;
  if (!reader_.started()) return;
  duplicateRatio_ =
      w[kAll] == 0 ? kNaN : static_cast<double>(w[kDuplicates]) / static_cast<double>(w[kAll]);
}

void FundFlowsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  const std::vector<std::string> bizNames = bizTypes_->names();
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
  {
    std::lock_guard lock(mutex_);
    for (std::size_t b = 0; b < bizNames.size(); ++b) {
      const Cells cells = b < publishedCounts_.size() ? publishedCounts_[b] : Cells{};
      for (FundFlowKind k : allValues<FundFlowKind>()) {
        const Labels labels{{"biz_type", bizNames[b]}, {"kind", std::string(format(k))}};
        addSample(flows, labels, static_cast<double>(cells.flows[cellOf(k)]));
        addSample(duplicates, labels, static_cast<double>(cells.duplicates[cellOf(k)]));
      }
    }
    addSample(ratio, {}, duplicateRatio_);
  }
  out.push_back(std::move(flows));
  out.push_back(std::move(duplicates));
  out.push_back(std::move(ratio));
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

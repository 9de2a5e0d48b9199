#include "collectors/collector_list.hpp"

#include "collectors/fund_flows_collector.hpp"
#include "collectors/overcharges_collector.hpp"
#include "collectors/requests_collector.hpp"
#include "collectors/transitions_collector.hpp"
#include "collectors/unsettled_records_collector.hpp"

namespace idem::exporter {

CollectorSet::CollectorSet(const CollectorSettings& settings)
    // Biz types that move money are always kept and have series from the first scrape, before
    // any row names them.
    : bizTypes_(std::make_shared<BizTypes>(settings.maxBizTypes, settings.reconciliation.bizTypes)),
      readStats_({"attempts", "fund_flows", "transitions"}) {
  collectors_.push_back(std::make_unique<UnsettledRecordsCollector>(bizTypes_));
  collectors_.push_back(
      std::make_unique<RequestsCollector>(bizTypes_, settings.reader, readStats_));
  collectors_.push_back(
      std::make_unique<FundFlowsCollector>(bizTypes_, settings.reader, readStats_));
  collectors_.push_back(std::make_unique<TransitionsCollector>(settings.reader, readStats_));
  collectors_.push_back(std::make_unique<ReconciliationCollector>(settings.reconciliation));
  collectors_.push_back(std::make_unique<OverchargesCollector>(settings.reconciliation));

  std::vector<std::string> stages{"connect"};
  for (const auto& c : collectors_) stages.emplace_back(c->name());
  auto health = std::make_unique<SelfHealthCollector>(readStats_, *bizTypes_, stages);
  health_ = health.get();
  collectors_.push_back(std::move(health));
}

std::vector<prometheus::MetricFamily> CollectorSet::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(24);
  for (const auto& c : collectors_) c->collect(out);
  return out;
}

}  // namespace idem::exporter

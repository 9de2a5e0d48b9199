#include "collectors/collector_list.hpp"

#include <utility>

#include "collectors/registry.hpp"

namespace idem::exporter {
namespace {

std::vector<const CollectorRegistration*> enabled(const ExporterOptions& options) {
  std::vector<const CollectorRegistration*> out;
  for (const CollectorRegistration* r : registeredCollectors()) {
    if (isEnabled(*r, options)) out.push_back(r);
  }
  return out;
}

std::vector<std::string> tablesOf(const std::vector<const CollectorRegistration*>& registrations) {
  std::vector<std::string> tables;
  for (const CollectorRegistration* r : registrations) {
    tables.insert(tables.end(), r->tables.begin(), r->tables.end());
  }
  return tables;
}

}  // namespace

CollectorSet::CollectorSet(const ExporterOptions& options)
    // Biz types that move money are always kept and have series from the first scrape, before
    // any row names them.
    : options_(options),
      bizTypes_(std::make_shared<BizTypes>(options.maxBizTypes, options.reconcileBizTypes)) {
  readStats_ = std::make_unique<ReadStats>(tablesOf(enabled(options_)));
  collectors_ = makeCollectors();
  std::vector<std::string> stages{"connect"};
  for (const auto& c : collectors_) stages.emplace_back(c->name());
  auto health = std::make_unique<SelfHealthCollector>(*readStats_, *bizTypes_, stages);
  health_ = health.get();
  collectors_.push_back(std::move(health));
}

std::vector<std::unique_ptr<Collector>> CollectorSet::makeCollectors() {
  ReaderLimits reader;
  reader.window = options_.ratioWindow;
  reader.maxTrackedGaps = options_.maxTrackedGaps;
  reader.standbyStatementBound = options_.standbyStatementBound;
  // Once a minute at the default interval of 5 s.
  reader.partitionFullReadInterval = 12 * options_.collectInterval;
  const CollectorContext context{options_, bizTypes_, reader, *readStats_};
  std::vector<std::unique_ptr<Collector>> out;
  for (const CollectorRegistration* r : enabled(options_)) out.push_back(r->make(context));
  return out;
}

void CollectorSet::restartCounts() {
  std::vector<std::unique_ptr<Collector>> fresh = makeCollectors();
  std::vector<std::unique_ptr<Collector>> old;
  {
    std::unique_lock lock(collectorsMutex_);
    fresh.push_back(std::move(collectors_.back()));  // self-health goes on
    collectors_.pop_back();
    old = std::exchange(collectors_, std::move(fresh));
  }
}

std::vector<prometheus::MetricFamily> CollectorSet::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(24);
  std::shared_lock lock(collectorsMutex_);
  for (const auto& c : collectors_) c->collect(out);
  return out;
}

}  // namespace idem::exporter

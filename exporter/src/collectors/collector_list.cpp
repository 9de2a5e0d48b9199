#include "collectors/collector_list.hpp"

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
    : bizTypes_(std::make_shared<BizTypes>(options.maxBizTypes, options.reconcileBizTypes)) {
  const std::vector<const CollectorRegistration*> registrations = enabled(options);
  readStats_ = std::make_unique<ReadStats>(tablesOf(registrations));
  ReaderLimits reader;
  reader.window = options.ratioWindow;
  reader.maxTrackedGaps = options.maxTrackedGaps;
  reader.standbyStatementBound = options.standbyStatementBound;
  const CollectorContext context{options, bizTypes_, reader, *readStats_};
  std::vector<std::string> stages{"connect"};
  for (const CollectorRegistration* r : registrations) {
    collectors_.push_back(r->make(context));
    stages.emplace_back(collectors_.back()->name());
  }
  auto health = std::make_unique<SelfHealthCollector>(*readStats_, *bizTypes_, stages);
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

#include "collectors/requests_collector.hpp"

#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The columns take() reads after id, created_at and biz_type.
constexpr const char* kColumns = "trigger_source, outcome";

// "replayed, in_progress or retired": the hit ratio's outcomes, as idem::isHit decides them.
std::string hitOutcomes() {
  std::vector<std::string_view> hits;
  for (Outcome o : allValues<Outcome>()) {
    if (isHit(o)) hits.push_back(format(o));
  }
  std::string out;
  for (std::size_t i = 0; i < hits.size(); ++i) {
    if (i > 0) out += (i + 1 == hits.size()) ? " or " : ", ";
    out += hits[i];
  }
  return out;
}

}  // namespace

RequestsCollector::RequestsCollector(std::shared_ptr<BizTypes> bizTypes, ReaderLimits limits,
                                     ReadStats& stats)
    : CountingCollector(std::move(bizTypes), "attempts", kColumns, limits, stats) {}

void RequestsCollector::take(const pqxx::row& row, RowOrigin origin) {
  const auto source = tryParse<TriggerSource>(row[3].c_str());
  const auto outcome = tryParse<Outcome>(row[4].c_str());
  if (!source || !outcome) {
    logWarn(std::string("idem.attempts id ") + row[0].c_str() + ": unknown trigger_source '" +
            row[3].c_str() + "' or outcome '" + row[4].c_str() + "', not counted");
    return;
  }
  if (requests::Cells* cells = cellsFor(row, origin)) {
    ++(*cells)[requests::cell(*source, *outcome)];
  }
  const double createdAt = row[1].as<double>();
  window().add(createdAt, kAll);
  if (isHit(*outcome)) window().add(createdAt, requests::kHits);
  if (!isFirstAttempt(*source)) {
    window().add(createdAt, requests::kFirstRetry + retryIndexOf(*source));
  }
}

void RequestsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto total = makeFamily("idempotency_requests_total",
                          "Requests that reached the idempotency layer (rows of idem.attempts "
                          "committed since the exporter started), as of the last collection.",
                          prometheus::MetricType::Counter);
  auto hit = makeFamily("idempotency_hit_ratio",
                        "Share of requests over --ratio-window answered by the idempotency layer "
                        "without calling downstream (outcome " +
                            hitOutcomes() + "), as of the last collection; NaN without requests.",
                        prometheus::MetricType::Gauge);
  auto retry = makeFamily("idempotency_retry_trigger_ratio",
                          "Share of requests over --ratio-window sent as a retry by source, as of "
                          "the last collection; NaN without requests.",
                          prometheus::MetricType::Gauge);
  const Snapshot published = snapshot();
  for (const auto& [biz, cells] : published.byBizType) {
    for (TriggerSource s : allValues<TriggerSource>()) {
      for (Outcome o : allValues<Outcome>()) {
        addSample(total,
                  {{"biz_type", biz},
                   {"source", std::string(format(s))},
                   {"outcome", std::string(format(o))}},
                  static_cast<double>(cells[requests::cell(s, o)]));
      }
    }
  }
  addSample(hit, {}, published.shares[requests::kHits]);
  for (std::size_t i = 0; i < kRetrySources.size(); ++i) {
    addSample(retry, {{"source", std::string(format(kRetrySources[i]))}},
              published.shares[requests::kFirstRetry + i]);
  }
  out.push_back(std::move(total));
  out.push_back(std::move(hit));
  out.push_back(std::move(retry));
}

// The requests collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector(
    {.name = "requests",
     .order = 20,
     .tables = {"attempts"},
     .make = [](const CollectorContext& c) {
       return std::make_unique<RequestsCollector>(c.bizTypes, c.reader, c.readStats);
     }});

}  // namespace idem::exporter

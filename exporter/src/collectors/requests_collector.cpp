#include "collectors/requests_collector.hpp"

#include <cmath>
#include <limits>
#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The columns take() reads after id and created_at.
constexpr const char* kColumns = "biz_type, trigger_source, outcome";

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
    : bizTypes_(std::move(bizTypes)),
      reader_(tableQueries("idem.attempts", kColumns), limits, stats.table("attempts")),
      window_(limits.window),
      hitRatio_(kNaN) {
  retryRatio_.fill(kNaN);
}

void RequestsCollector::take(const pqxx::row& row, RowOrigin origin) {
  const auto source = tryParse<TriggerSource>(row[3].c_str());
  const auto outcome = tryParse<Outcome>(row[4].c_str());
  if (!source || !outcome) {
    logWarn(std::string("idem.attempts id ") + row[0].c_str() + ": unknown trigger_source '" +
            row[3].c_str() + "' or outcome '" + row[4].c_str() + "', not counted");
    return;
  }
  if (origin != RowOrigin::BeforeStart) {
    bool overflow = false;
    const std::size_t biz = bizTypes_->intern(row[2].c_str(), &overflow);
    if (overflow) bizTypes_->countOverflow();
    if (counts_.size() <= biz) counts_.resize(biz + 1, Cells{});
    ++counts_[biz][cell(*source, *outcome)];
  } else {
    bizTypes_->intern(row[2].c_str());
  }
  const double createdAt = row[1].as<double>();
  window_.add(createdAt, kAll);
  if (isHit(*outcome)) window_.add(createdAt, kHits);
  if (!isFirstAttempt(*source)) window_.add(createdAt, kFirstRetry + retryIndexOf(*source));
}

void RequestsCollector::update(pqxx::connection& connection) {
  reader_.pollAndPublish(
      connection, [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); },
      [this] { publish(); });
}

void RequestsCollector::publish() {
  const Window::Counts w = window_.sum(reader_.snapshotTime());
  std::lock_guard lock(mutex_);
  publishedCounts_ = counts_;
  if (!reader_.started()) return;  // no window yet: the ratios stay NaN
  const auto all = static_cast<double>(w[kAll]);
  hitRatio_ = w[kAll] == 0 ? kNaN : static_cast<double>(w[kHits]) / all;
  for (std::size_t i = 0; i < retryRatio_.size(); ++i) {
    retryRatio_[i] = w[kAll] == 0 ? kNaN : static_cast<double>(w[kFirstRetry + i]) / all;
  }
}

void RequestsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  const std::vector<std::string> bizNames = bizTypes_->names();
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
  {
    std::lock_guard lock(mutex_);
    for (std::size_t b = 0; b < bizNames.size(); ++b) {
      const Cells cells = b < publishedCounts_.size() ? publishedCounts_[b] : Cells{};
      for (TriggerSource s : allValues<TriggerSource>()) {
        for (Outcome o : allValues<Outcome>()) {
          addSample(total,
                    {{"biz_type", bizNames[b]},
                     {"source", std::string(format(s))},
                     {"outcome", std::string(format(o))}},
                    static_cast<double>(cells[cell(s, o)]));
        }
      }
    }
    addSample(hit, {}, hitRatio_);
    for (TriggerSource s : kRetrySources) {
      addSample(retry, {{"source", std::string(format(s))}}, retryRatio_[retryIndexOf(s)]);
    }
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

#include "collectors/unsettled_records_collector.hpp"

#include <algorithm>
#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The WHERE clause is the records_unsettled index's predicate, so the planner reads only that
// index's entries. Ages count from updated_at: when the record entered its current status.
// idem.lease_expired (sql/migrations/010) is the schema's one definition of a lease that ran out.
constexpr const char* kUnsettled = R"SQL(
SELECT biz_type, status, count(*),
       count(*) FILTER (WHERE idem.lease_expired(status, lease_expires_at)),
       extract(epoch FROM now() - min(updated_at))::float8
  FROM idem.records
 WHERE status IN ('PROCESSING', 'UNKNOWN')
 GROUP BY biz_type, status
)SQL";

// The distinct biz types, by a skip scan (one index probe per biz type) over the indexes that
// lead with biz_type: records_one_live_per_biz and fund_flows_by_biz.
constexpr const char* kKnownBizTypes = R"SQL(
WITH RECURSIVE live AS (
    (SELECT biz_type FROM idem.records WHERE status <> 'FAILED' ORDER BY biz_type LIMIT 1)
  UNION ALL
    SELECT (SELECT r.biz_type FROM idem.records r
             WHERE r.status <> 'FAILED' AND r.biz_type > live.biz_type
             ORDER BY r.biz_type LIMIT 1)
      FROM live WHERE live.biz_type IS NOT NULL
), flows AS (
    (SELECT biz_type FROM idem.fund_flows ORDER BY biz_type LIMIT 1)
  UNION ALL
    SELECT (SELECT f.biz_type FROM idem.fund_flows f
             WHERE f.biz_type > flows.biz_type ORDER BY f.biz_type LIMIT 1)
      FROM flows WHERE flows.biz_type IS NOT NULL
)
SELECT biz_type FROM live WHERE biz_type IS NOT NULL
UNION
SELECT biz_type FROM flows WHERE biz_type IS NOT NULL
ORDER BY 1
LIMIT 1000
)SQL";

}  // namespace

UnsettledRecordsCollector::UnsettledRecordsCollector(std::shared_ptr<BizTypes> bizTypes)
    : bizTypes_(std::move(bizTypes)) {}

void UnsettledRecordsCollector::update(pqxx::connection& connection) {
  idem::ReadTransaction tx(connection);
  if (!discovered_) {
    for (const pqxx::row& row : tx.exec(kKnownBizTypes)) bizTypes_->intern(row[0].c_str());
    discovered_ = true;
  }
  State next;
  for (const pqxx::row& row : tx.exec(kUnsettled)) {
    // Past --max-biz-types, several biz types share the label "other": their counts add up.
    const std::string biz = bizTypes_->labelOf(row[0].c_str());
    const std::string status = row[1].c_str();
    const auto count = row[2].as<double>();
    const auto age = row[4].as<double>();
    if (status == "PROCESSING") {
      next.processing[biz] += count;
      next.stuck[biz] += row[3].as<double>();
      next.oldestProcessing = std::max(next.oldestProcessing, age);
    } else {
      next.unknown[biz] += count;
      next.oldestUnknown = std::max(next.oldestUnknown, age);
    }
  }
  tx.commit();
  std::lock_guard lock(mutex_);
  state_ = std::move(next);
}

void UnsettledRecordsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  const std::vector<std::string> bizNames = bizTypes_->names();
  auto records = makeFamily("idempotency_records",
                            "Idempotency records now PROCESSING or UNKNOWN (unsettled), as of the "
                            "last collection.",
                            prometheus::MetricType::Gauge);
  auto stuck = makeFamily("idempotency_stuck_records",
                          "Records PROCESSING past their lease (the caller died or hangs), as of "
                          "the last collection.",
                          prometheus::MetricType::Gauge);
  auto oldest = makeFamily("idempotency_oldest_unsettled_age_seconds",
                           "Seconds the oldest PROCESSING / UNKNOWN record has been in that status "
                           "(0 when none), as of the last collection.",
                           prometheus::MetricType::Gauge);
  std::lock_guard lock(mutex_);
  auto value = [](const std::map<std::string, double>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? 0.0 : it->second;
  };
  for (const std::string& biz : bizNames) {
    addSample(records, {{"biz_type", biz}, {"status", "PROCESSING"}},
              value(state_.processing, biz));
    addSample(records, {{"biz_type", biz}, {"status", "UNKNOWN"}}, value(state_.unknown, biz));
    addSample(stuck, {{"biz_type", biz}}, value(state_.stuck, biz));
  }
  addSample(oldest, {{"status", "PROCESSING"}}, state_.oldestProcessing);
  addSample(oldest, {{"status", "UNKNOWN"}}, state_.oldestUnknown);
  out.push_back(std::move(records));
  out.push_back(std::move(stuck));
  out.push_back(std::move(oldest));
}

// The unsettled records collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector(
    {.name = "unsettled_records", .order = 10, .make = [](const CollectorContext& c) {
       return std::make_unique<UnsettledRecordsCollector>(c.bizTypes);
     }});

}  // namespace idem::exporter

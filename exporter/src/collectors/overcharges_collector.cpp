#include "collectors/overcharges_collector.hpp"

#include <pqxx/nontransaction>
#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The business objects charged within the window (BRIN on created_at), then all the flows of each
// (fund_flows_by_biz), so that a charge inside the window is weighed against a first charge or a
// refund outside it. Per object and currency: charged - the first charge (when in that currency)
// - refunded; positive is the excess still owed.
constexpr const char* kOvercharges = R"SQL(
WITH charged AS (
    SELECT DISTINCT f.biz_type, f.biz_id
      FROM idem.fund_flows f
     WHERE f.kind IN ('DEBIT', 'CAPTURE')
       AND f.biz_type = ANY($1::text[])
       AND f.created_at >= now() - $2::interval
), flows AS (
    SELECT c.biz_type, c.biz_id, f.id, f.kind, f.amount_minor, f.currency,
           min(f.id) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
               OVER (PARTITION BY c.biz_type, c.biz_id) AS first_charge
      FROM charged c
      JOIN idem.fund_flows f ON f.biz_type = c.biz_type AND f.biz_id = c.biz_id
), excess AS (
    SELECT biz_type, biz_id, currency,
           coalesce(sum(amount_minor) FILTER (WHERE kind IN ('DEBIT', 'CAPTURE')
                                                AND id <> first_charge), 0)
         - coalesce(sum(amount_minor) FILTER (WHERE kind = 'REFUND'), 0) AS owed
      FROM flows
     GROUP BY biz_type, biz_id, currency
)
-- Per (biz type, currency) the objects and the excess; per biz type alone (currency NULL) the
-- objects, each once even when overcharged in two currencies.
SELECT biz_type, currency, count(DISTINCT biz_id)::float8, sum(owed)::float8
  FROM excess
 WHERE owed > 0
 GROUP BY GROUPING SETS ((biz_type, currency), (biz_type))
)SQL";

std::string intervalText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

}  // namespace

OverchargesCollector::OverchargesCollector(ReconciliationSettings settings)
    : settings_(std::move(settings)) {
  for (const std::string& biz : settings_.bizTypes) objects_[biz] = 0;
}

void OverchargesCollector::update(pqxx::connection& connection) {
  pqxx::nontransaction tx(connection);
  const pqxx::result rows = tx.exec_params(kOvercharges, textArrayLiteral(settings_.bizTypes),
                                           intervalText(settings_.window));
  std::map<std::string, double> objects;
  for (const std::string& biz : settings_.bizTypes) objects[biz] = 0;
  std::map<std::pair<std::string, std::string>, double> amounts;
  for (const pqxx::row& row : rows) {
    if (row[1].is_null()) {
      objects[row[0].c_str()] = row[2].as<double>();
    } else {
      amounts[{row[0].c_str(), row[1].c_str()}] = row[3].as<double>();
    }
  }
  std::lock_guard lock(mutex_);
  objects_ = std::move(objects);
  for (auto& [key, v] : amounts_) v = 0;  // seen currencies stay, at 0 once refunded
  for (auto& [key, v] : amounts) amounts_[key] = v;
}

void OverchargesCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto objects = makeFamily("idempotency_overcharged_business_objects",
                            "Business objects of --reconcile-biz-types charged within "
                            "--reconcile-window whose DEBIT and CAPTURE flows exceed their first "
                            "charge plus their refunds (a duplicate charge not refunded yet), as "
                            "of the last reconciliation.",
                            prometheus::MetricType::Gauge);
  auto amounts = makeFamily("idempotency_overcharged_amount_minor",
                            "The total excess of the overcharged business objects, in minor units "
                            "of the currency, as of the last reconciliation.",
                            prometheus::MetricType::Gauge);
  std::lock_guard lock(mutex_);
  for (const auto& [biz, n] : objects_) addSample(objects, {{"biz_type", biz}}, n);
  for (const auto& [key, v] : amounts_) {
    addSample(amounts, {{"biz_type", key.first}, {"currency", key.second}}, v);
  }
  out.push_back(std::move(objects));
  out.push_back(std::move(amounts));
}

// The overcharges collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector({
    .name = "overcharges",
    .order = 60,
    // Its flags are the reconciliation's (--reconcile-interval, -window, -biz-types).
    .make =
        [](const CollectorContext& c) {
          const ExporterOptions& o = c.options;
          return std::make_unique<OverchargesCollector>(ReconciliationSettings{
              o.reconcileInterval, o.reconcileWindow, o.reconcileGrace, o.reconcileBizTypes});
        },
});

}  // namespace idem::exporter

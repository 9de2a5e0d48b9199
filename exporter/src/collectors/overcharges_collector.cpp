#include "collectors/overcharges_collector.hpp"

#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// Per (biz type, currency) the objects and the excess; per biz type alone (currency NULL) the
// objects, each once even when overcharged in two currencies. The function is inlined into this
// query, its unused columns (the keys' agents) left out of the plan.
constexpr const char* kOvercharges = R"SQL(
SELECT biz_type, currency, count(DISTINCT biz_id)::float8, sum(owed_minor)::float8
  FROM idem.overcharged_objects($1::text[], $2::interval)
 GROUP BY GROUPING SETS ((biz_type, currency), (biz_type))
)SQL";

}  // namespace

OverchargesCollector::OverchargesCollector(ReconciliationSettings settings,
                                           std::size_t maxCurrencies)
    : MoneyQuestionCollector(std::move(settings)), currencies_(maxCurrencies) {
  for (const std::string& biz : settings_.bizTypes) objects_[biz] = 0;
}

void OverchargesCollector::update(pqxx::connection& connection) {
  idem::ReadTransaction tx(connection);
  requireMoneyQuestion(tx, "idem.overcharged_objects(text[],interval)");
  const pqxx::result rows = tx.exec_params(kOvercharges, bizTypesParameter(), windowParameter());
  tx.commit();
  std::map<std::string, double> objects;
  for (const std::string& biz : settings_.bizTypes) objects[biz] = 0;
  std::map<std::pair<std::string, std::string>, double> amounts;
  for (const pqxx::row& row : rows) {
    if (row[1].is_null()) {
      objects[row[0].c_str()] = row[2].as<double>();
    } else {
      amounts[{row[0].c_str(), currencies_.labelOf(row[1].c_str())}] += row[3].as<double>();
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
          return std::make_unique<OverchargesCollector>(ReconciliationSettings::from(c.options),
                                                        c.options.maxCurrencies);
        },
});

}  // namespace idem::exporter

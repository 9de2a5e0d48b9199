#include "collectors/overcharges_collector.hpp"

#include <algorithm>
#include <chrono>
#include <pqxx/pqxx>
#include <span>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// Each flow, and whether it may change what its object owes: a DEBIT, CAPTURE or REFUND of the
// reconciled biz types whose object was charged more than once.
TableQueries flowQueries(const std::string& bizTypes) {
  return joinedTableQueries(
      "idem.fund_flows", "f",
      "f.biz_type, f.biz_id, f.kind IN ('DEBIT', 'CAPTURE', 'REFUND') AND f.biz_type = ANY(" +
          bizTypes +
          ") AND EXISTS (SELECT FROM idem.charged_objects AS co WHERE co.biz_type = f.biz_type"
          " AND co.biz_id = f.biz_id AND co.charges > 1)",
      "");
}

// The start's objects: those the definition (idem.overcharged_objects) walks, charged more than
// once with a charge within the window ($2).
constexpr const char* kRepeated = R"SQL(
SELECT co.biz_type, co.biz_id
  FROM idem.charged_objects AS co
 WHERE co.charges > 1 AND co.last_charge_at >= now() - $2::interval
   AND co.biz_type = ANY($1::text[])
)SQL";

// What each of the objects ($1 biz types, $2 biz ids) owes per currency, and its latest charge:
// idem.overcharged_objects' arithmetic for those objects alone (the DEBIT and CAPTURE flows less
// the first of them, less the REFUNDs); tst_exporter_money holds the two equal.
constexpr const char* kOwed = R"SQL(
SELECT g.biz_type, g.biz_id, g.currency,
       (coalesce(sum(g.amount) FILTER (WHERE g.charge AND g.id <> g.first_id), 0)
        - coalesce(sum(g.amount) FILTER (WHERE g.kind = 'REFUND'), 0))::float8,
       extract(epoch FROM max(g.latest_charge_at))::float8
  FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id,
               f.currency::text AS currency, f.kind::text AS kind, f.id,
               f.amount_minor::numeric AS amount, f.kind IN ('DEBIT', 'CAPTURE') AS charge,
               first_value(f.id) OVER o AS first_id,
               max(f.created_at) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
                   OVER (PARTITION BY f.biz_type, f.biz_id) AS latest_charge_at
          FROM unnest($1::text[], $2::text[]) AS x(biz_type, biz_id)
          JOIN idem.fund_flows AS f ON f.biz_type = x.biz_type AND f.biz_id = x.biz_id
        WINDOW o AS (PARTITION BY f.biz_type, f.biz_id
                     ORDER BY f.kind IN ('DEBIT', 'CAPTURE') DESC, f.id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) AS g
 GROUP BY g.biz_type, g.biz_id, g.currency
)SQL";

}  // namespace

OverchargesCollector::OverchargesCollector(ReconciliationSettings settings,
                                           std::size_t maxCurrencies, ReaderLimits limits,
                                           ReadStats& stats)
    : MoneyQuestionCollector(std::move(settings)),
      flows_(flowQueries(bizTypesConstant()), startLimits(limits), stats.table(kFlowsTable)),
      currencies_(maxCurrencies) {
  for (const std::string& biz : settings_.bizTypes) objects_[biz] = 0;
}

void OverchargesCollector::update(pqxx::connection& connection) {
  {
    idem::ReadTransaction tx(connection);
    requireMoneyQuestion(tx, "idem.overcharged_objects(text[],interval)");
    tx.commit();
  }
  if (!flows_.started()) {
    start(connection);
    publish(flows_.snapshotTime());
    return;
  }
  flows_.poll(connection, [this](const pqxx::row& row, RowOrigin) {
    if (row[4].as<bool>()) dirty_.push_back(objectKey(row[2], row[3]));
  });
  if (!dirty_.empty()) {
    idem::ReadTransaction tx(connection);
    recompute(tx);
    tx.commit();
  }
  publish(flows_.snapshotTime());
}

void OverchargesCollector::start(pqxx::connection& connection) {
  const idem::StatementTimeoutScope longer(startTimeout());
  try {
    idem::SnapshotRead tx(connection);
    for (const pqxx::row& row :
         tx.exec_params(kRepeated, bizTypesParameter(), startWindowParameter())) {
      dirty_.push_back(objectKey(row[0], row[1]));
    }
    // The objects charged more than once within the window, read above, are every object the
    // definition walks in this snapshot: the rows below the high-water mark are read for their
    // gaps only (in flight now, they are read when they commit).
    flows_.startWithin(tx, {});
    recompute(tx);
    tx.commit();
  } catch (...) {
    flows_.reset();
    owed_.clear();
    dirty_.clear();
    throw;
  }
}

void OverchargesCollector::recompute(pqxx::transaction_base& tx) {
  std::sort(dirty_.begin(), dirty_.end());
  dirty_.erase(std::unique(dirty_.begin(), dirty_.end()), dirty_.end());
  // An object whose latest charge is older than the window is one publish() would drop: it is
  // not kept. (The start's reader reads back further than the window, and meets many of them.)
  const double from =
      flows_.snapshotTime() - std::chrono::duration<double>(settings_.window).count();
  const std::span<const ObjectKey> all(dirty_);
  for (std::size_t at = 0; at < all.size(); at += kRecomputeChunk) {
    const std::span<const ObjectKey> chunk =
        all.subspan(at, std::min(kRecomputeChunk, all.size() - at));
    const auto [types, ids] = objectsParameters(chunk);
    const pqxx::result rows = tx.exec_params(kOwed, types, ids);
    for (const ObjectKey& key : chunk) owed_.erase(key);
    for (const pqxx::row& row : rows) {
      const double owed = row[3].as<double>();
      if (owed <= 0) continue;  // (and an object with no charge has no latest one: NULL)
      const double latestChargeAt = row[4].as<double>();
      if (latestChargeAt < from) continue;
      Owed& o = owed_[objectKey(row[0], row[1])];
      o.bizType = row[0].c_str();
      o.latestChargeAt = latestChargeAt;
      o.byCurrency[row[2].c_str()] = owed;
    }
  }
  dirty_.clear();
}

void OverchargesCollector::publish(double now) {
  const double from = now - std::chrono::duration<double>(settings_.window).count();
  std::map<std::string, double> objects;
  for (const std::string& biz : settings_.bizTypes) objects[biz] = 0;
  std::map<std::pair<std::string, std::string>, double> amounts;
  for (auto it = owed_.begin(); it != owed_.end();) {
    const Owed& o = it->second;
    if (o.latestChargeAt < from) {
      it = owed_.erase(it);
      continue;
    }
    objects[o.bizType] += 1;
    for (const auto& [currency, amount] : o.byCurrency) {
      amounts[{o.bizType, currencies_.labelOf(currency)}] += amount;
    }
    ++it;
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
    .tables = {OverchargesCollector::kFlowsTable},
    // Its flags are the reconciliation's (--reconcile-interval, -window, -biz-types).
    .make =
        [](const CollectorContext& c) {
          return std::make_unique<OverchargesCollector>(ReconciliationSettings::from(c.options),
                                                        c.options.maxCurrencies, c.reader,
                                                        c.readStats);
        },
});

}  // namespace idem::exporter

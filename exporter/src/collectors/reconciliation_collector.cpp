#include "collectors/reconciliation_collector.hpp"

#include <algorithm>
#include <pqxx/pqxx>
#include <stdexcept>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/duration.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// Whether the schema has a function: asked at every reconciliation, so that an upgrade in place
// while the exporter runs is followed without a restart.
constexpr const char* kHasFunction = "SELECT to_regprocedure($1) IS NOT NULL";

// '{"a","b"}': a text[] parameter in text form, quoted so that any biz type is safe.
std::string textArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string intervalText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

constexpr char kKeySeparator = '\x1f';

// Each flow, and for a DEBIT or CAPTURE of the reconciled biz types whether its object has a
// SUCCESS record or the tombstone of one (NULL for any other flow), asked in the statement that
// reads it.
TableQueries flowQueries(const std::string& bizTypes) {
  const std::string charge =
      "(f.kind IN ('DEBIT', 'CAPTURE') AND f.biz_type = ANY(" + bizTypes + "))";
  return joinedTableQueries(
      "idem.fund_flows", "f",
      "f.biz_type, f.biz_id, " + charge + ", CASE WHEN " + charge +
          " THEN EXISTS (SELECT FROM idem.records AS x WHERE x.status = 'SUCCESS'"
          " AND x.biz_type = f.biz_type AND x.biz_id = f.biz_id)"
          " OR EXISTS (SELECT FROM idem.retired_keys AS t WHERE t.status = 'SUCCESS'"
          " AND t.biz_type = f.biz_type AND t.biz_id = f.biz_id) END",
      "");
}

// Each transition, and for one to SUCCESS its object, when the record succeeded (its updated_at,
// which the definition reads) and, for the reconciled biz types, whether the object has a DEBIT or
// CAPTURE flow. A record already purged answers from its tombstone: the object only.
TableQueries transitionQueries(const std::string& bizTypes) {
  return joinedTableQueries(
      "idem.transitions", "t", "s.biz_type, s.biz_id, s.succeeded_at, s.charged",
      "LEFT JOIN LATERAL ("
      "SELECT r.biz_type::text AS biz_type, r.biz_id::text AS biz_id,"
      " extract(epoch FROM r.updated_at)::float8 AS succeeded_at,"
      " CASE WHEN r.biz_type = ANY(" +
          bizTypes +
          ") THEN EXISTS (SELECT FROM idem.fund_flows AS f"
          " WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id"
          " AND f.kind IN ('DEBIT', 'CAPTURE')) END AS charged"
          " FROM idem.records AS r"
          " WHERE t.to_status = 'SUCCESS' AND r.idempotency_key = t.idempotency_key"
          " AND r.status = 'SUCCESS'"
          " UNION ALL"
          " SELECT k.biz_type::text, k.biz_id::text, NULL, NULL FROM idem.retired_keys AS k"
          " WHERE t.to_status = 'SUCCESS' AND k.idempotency_key = t.idempotency_key"
          " AND k.status = 'SUCCESS'"
          " LIMIT 1) AS s ON true");
}

// The start's open questions, from the definitions themselves over the window ($2) with no grace
// and no end: each charge within the window of an object charged without a SUCCESS, and each
// SUCCESS without a charge. No end, not now(): the snapshot, taken at the transaction's first
// statement, may show rows stamped after its now() (a transaction that began after this one's
// and committed before its snapshot; a standby's clock behind the primary's), which the readers
// never read again; publish counts each once its time has passed the grace.
constexpr const char* kOpenCharges = R"SQL(
SELECT f.biz_type::text, f.biz_id::text, extract(epoch FROM f.created_at)::float8
  FROM idem.money_moved_without_success($1::text[], $2::interval, interval '-1000 years') AS m
  JOIN idem.fund_flows AS f ON f.biz_type = m.biz_type AND f.biz_id = m.biz_id
 WHERE f.kind IN ('DEBIT', 'CAPTURE') AND f.created_at >= now() - $2::interval
)SQL";
constexpr const char* kOpenSuccesses = R"SQL(
SELECT s.biz_type, s.biz_id, extract(epoch FROM s.succeeded_at)::float8
  FROM idem.success_without_money_moved($1::text[], $2::interval, interval '-1000 years') AS s
)SQL";

// The open SUCCESS entries ($1 biz types, $2 biz ids) whose SUCCESS record is gone.
constexpr const char* kPurgedSuccesses = R"SQL(
SELECT o.biz_type, o.biz_id
  FROM unnest($1::text[], $2::text[]) AS o(biz_type, biz_id)
 WHERE NOT EXISTS (SELECT FROM idem.records AS x
                    WHERE x.status = 'SUCCESS' AND x.biz_type = o.biz_type
                      AND x.biz_id = o.biz_id)
)SQL";

}  // namespace

ReconciliationSettings ReconciliationSettings::from(const ExporterOptions& o) {
  return {o.reconcileInterval, o.reconcileWindow, o.reconcileGrace, o.reconcileBizTypes};
}

void MoneyQuestionCollector::requireMoneyQuestion(pqxx::transaction_base& tx,
                                                  const std::string& function) {
  if (!tx.exec_params1(kHasFunction, function)[0].as<bool>()) {
    throw std::runtime_error(
        "the database's schema has no " + function +
        " yet (sql/migrations/012_money_questions.sql): migrate it (idemctl migrate); "
        "until then the last figures stay");
  }
}

std::string MoneyQuestionCollector::bizTypesParameter() const {
  return textArrayLiteral(settings_.bizTypes);
}
std::string MoneyQuestionCollector::windowParameter() const {
  return intervalText(settings_.window);
}
std::string MoneyQuestionCollector::graceParameter() const {
  return intervalText(settings_.grace);
}

MoneyQuestionCollector::ObjectKey MoneyQuestionCollector::objectKey(const pqxx::field& bizType,
                                                                    const pqxx::field& bizId) {
  ObjectKey key = bizType.c_str();
  key += kKeySeparator;
  key += bizId.c_str();
  return key;
}

std::pair<std::string, std::string> MoneyQuestionCollector::objectsParameters(
    std::span<const ObjectKey> objects) {
  std::vector<std::string> types;
  std::vector<std::string> ids;
  types.reserve(objects.size());
  ids.reserve(objects.size());
  for (const ObjectKey& key : objects) {
    const std::size_t cut = key.find(kKeySeparator);
    types.push_back(key.substr(0, cut));
    ids.push_back(key.substr(cut + 1));
  }
  return {textArrayLiteral(types), textArrayLiteral(ids)};
}

std::string MoneyQuestionCollector::bizTypesConstant() const {
  std::string out = "'";
  for (char c : bizTypesParameter()) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'::text[]";
}

std::string MoneyQuestionCollector::startWindowParameter() const {
  return intervalText(settings_.window + std::chrono::minutes(1));
}

std::chrono::milliseconds MoneyQuestionCollector::startTimeout() {
  return std::max(idem::currentStatementTimeout(),
                  std::chrono::milliseconds(std::chrono::minutes(5)));
}

ReaderLimits MoneyQuestionCollector::startLimits(ReaderLimits limits) {
  limits.window = std::chrono::milliseconds(0);
  return limits;
}

ReconciliationCollector::ReconciliationCollector(ReconciliationSettings settings,
                                                 ReaderLimits limits, ReadStats& stats)
    : MoneyQuestionCollector(std::move(settings)),
      flows_(flowQueries(bizTypesConstant()), startLimits(limits), stats.table(kFlowsTable)),
      transitions_(transitionQueries(bizTypesConstant()), startLimits(limits),
                   stats.table(kTransitionsTable)) {}

void ReconciliationCollector::update(pqxx::connection& connection) {
  {
    idem::ReadTransaction tx(connection);
    requireMoneyQuestion(tx, "idem.money_moved_without_success(text[],interval,interval)");
    tx.commit();
  }
  if (!flows_.started() || !transitions_.started()) {
    start(connection);
    publish(transitions_.snapshotTime());
    return;
  }
  // Flows first, then transitions: any order would do (see the header), one is needed.
  flows_.poll(connection, [this](const pqxx::row& row, RowOrigin) { takeFlow(row); });
  transitions_.poll(connection, [this](const pqxx::row& row, RowOrigin) { takeTransition(row); });
  dropPurgedSuccesses(connection);
  publish(transitions_.snapshotTime());
}

void ReconciliationCollector::start(pqxx::connection& connection) {
  // Once, and as long as the old whole-window question took at every reconciliation: a longer
  // bound than the collections' own.
  const idem::StatementTimeoutScope longer(startTimeout());
  try {
    idem::SnapshotRead tx(connection);
    const std::string window = startWindowParameter();
    for (const pqxx::row& row : tx.exec_params(kOpenCharges, bizTypesParameter(), window)) {
      openCharges_[objectKey(row[0], row[1])].push_back(row[2].as<double>());
    }
    for (const pqxx::row& row : tx.exec_params(kOpenSuccesses, bizTypesParameter(), window)) {
      openSuccesses_[objectKey(row[0], row[1])] = row[2].as<double>();
    }
    // From the same snapshot on: what committed after it. The last ids below it are read for
    // their gaps only (in flight at the snapshot, their rows are read when they commit); what the
    // visible ones say, the two questions above already answered in this snapshot.
    flows_.startWithin(tx, {});
    transitions_.startWithin(tx, {});
    tx.commit();
  } catch (...) {
    flows_.reset();
    transitions_.reset();
    openCharges_.clear();
    openSuccesses_.clear();
    throw;
  }
}

void ReconciliationCollector::takeFlow(const pqxx::row& row) {
  // id, created_at, biz_type, biz_id, charge, paid
  if (!row[4].as<bool>()) return;
  ObjectKey key = objectKey(row[2], row[3]);
  openSuccesses_.erase(key);
  if (!row[5].as<bool>()) openCharges_[std::move(key)].push_back(row[1].as<double>());
}

void ReconciliationCollector::takeTransition(const pqxx::row& row) {
  // id, created_at, biz_type, biz_id, succeeded_at, charged: NULL but for a SUCCESS
  if (row[2].is_null()) return;
  ObjectKey key = objectKey(row[2], row[3]);
  openCharges_.erase(key);
  if (!row[5].is_null() && !row[5].as<bool>())
    openSuccesses_.emplace(std::move(key), row[4].as<double>());
}

void ReconciliationCollector::dropPurgedSuccesses(pqxx::connection& connection) {
  if (openSuccesses_.empty()) return;
  const std::size_t n = std::min(kRecheckPerCollection, openSuccesses_.size());
  std::vector<ObjectKey> asked;
  asked.reserve(n);
  auto it = openSuccesses_.upper_bound(recheckAfter_);
  for (std::size_t i = 0; i < n; ++i, ++it) {
    if (it == openSuccesses_.end()) it = openSuccesses_.begin();
    asked.push_back(it->first);
    recheckAfter_ = it->first;
  }
  const auto [types, ids] = objectsParameters(asked);
  idem::ReadTransaction tx(connection);
  const pqxx::result gone = tx.exec_params(kPurgedSuccesses, types, ids);
  tx.commit();
  for (const pqxx::row& row : gone) openSuccesses_.erase(objectKey(row[0], row[1]));
}

void ReconciliationCollector::publish(double now) {
  const double from = now - std::chrono::duration<double>(settings_.window).count();
  const double until = now - std::chrono::duration<double>(settings_.grace).count();
  auto inRange = [&](double t) { return t >= from && t < until; };
  double charged = 0;
  for (auto it = openCharges_.begin(); it != openCharges_.end();) {
    std::vector<double>& times = it->second;
    std::erase_if(times, [&](double t) { return t < from; });
    if (times.empty()) {
      it = openCharges_.erase(it);
      continue;
    }
    if (std::any_of(times.begin(), times.end(), inRange)) ++charged;
    ++it;
  }
  double succeeded = 0;
  for (auto it = openSuccesses_.begin(); it != openSuccesses_.end();) {
    if (it->second < from) {
      it = openSuccesses_.erase(it);
      continue;
    }
    if (inRange(it->second)) ++succeeded;
    ++it;
  }
  std::lock_guard lock(mutex_);
  debitWithoutSuccess_ = charged;
  successWithoutDebit_ = succeeded;
  lastSuccess_ = now;
}

void ReconciliationCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto mismatches = makeFamily(
      "idempotency_reconciliation_mismatches",
      "Business objects of --reconcile-biz-types over --reconcile-window, older than "
      "--reconcile-grace, whose fund flows and records disagree, as of the last reconciliation: "
      "debit_without_success (a DEBIT or CAPTURE, no SUCCESS record or tombstone), "
      "success_without_debit (SUCCESS, no DEBIT or CAPTURE flow).",
      prometheus::MetricType::Gauge);
  auto last = makeFamily("idempotency_exporter_last_reconcile_success_timestamp_seconds",
                         "When the last reconciliation succeeded (database clock), seconds since "
                         "the epoch; 0 before the first.",
                         prometheus::MetricType::Gauge);
  std::lock_guard lock(mutex_);
  addSample(mismatches, {{"kind", "debit_without_success"}}, debitWithoutSuccess_);
  addSample(mismatches, {{"kind", "success_without_debit"}}, successWithoutDebit_);
  addSample(last, {}, lastSuccess_);
  out.push_back(std::move(mismatches));
  out.push_back(std::move(last));
}

// The reconciliation collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector({
    .name = "reconciliation",
    .order = 50,
    .tables = {ReconciliationCollector::kFlowsTable, ReconciliationCollector::kTransitionsTable},
    .declareFlags =
        [](CommandLine& cli, ExporterOptions& o) {
          cli.duration("reconcile-interval", "how often to reconcile fund flows with records",
                       o.reconcileInterval, std::chrono::milliseconds(100));
          cli.duration("reconcile-window", "how far back reconciliation looks", o.reconcileWindow,
                       std::chrono::milliseconds(1000));
          cli.duration("reconcile-grace", "ignore what is younger than this", o.reconcileGrace);
          cli.list("reconcile-biz-types", "LIST", "comma-separated biz types that move money",
                   o.reconcileBizTypes);
          cli.check([&o] {
            if (o.reconcileGrace >= o.reconcileWindow) {
              throw UsageError("--reconcile-grace (" + formatDuration(o.reconcileGrace) +
                               ") must be shorter than --reconcile-window (" +
                               formatDuration(o.reconcileWindow) + ")");
            }
          });
        },
    .make =
        [](const CollectorContext& c) {
          return std::make_unique<ReconciliationCollector>(ReconciliationSettings::from(c.options),
                                                           c.reader, c.readStats);
        },
});

}  // namespace idem::exporter

#include "collectors/reconciliation_collector.hpp"

#include <pqxx/nontransaction>
#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/duration.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// Both queries walk only the window's rows and probe the other table by index for each: the
// EXISTS sits in a FILTER clause, where PostgreSQL keeps it a correlated subplan (one index probe
// per row) instead of turning it into an anti join, which it would run as a merge or hash join
// over the whole other table, a cost that grows with the table instead of the window.

// Money moves by a DEBIT or a CAPTURE (the capture of a FREEZE hold); docs/contract/schema.md,
// "Money moved". Both queries count them alike.

// DEBIT and CAPTURE flows in the window (BRIN on created_at), per business object, each probed
// against the one SUCCESS record a business object may have (the unique partial index
// records_one_live_per_biz, whose predicate status = 'SUCCESS' implies; version 1 also had
// records_one_success_per_biz). %TOMBSTONE% is empty on a version-1 schema; from version 2 on it
// also accepts the tombstone that retention left of a purged SUCCESS record (idem.retired_keys,
// probed through retired_keys_paid_biz): a business object that succeeded stays succeeded when
// its record is removed.
constexpr std::string_view kDebitWithoutSuccess = R"SQL(
SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM idem.records r
                                           WHERE r.biz_type = d.biz_type AND r.biz_id = d.biz_id
                                             AND r.status = 'SUCCESS')%TOMBSTONE%)
  FROM (SELECT DISTINCT f.biz_type, f.biz_id
          FROM idem.fund_flows f
         WHERE f.kind IN ('DEBIT', 'CAPTURE')
           AND f.biz_type = ANY($1::text[])
           AND f.created_at >= now() - $2::interval
           AND f.created_at < now() - $3::interval) AS d
)SQL";

constexpr std::string_view kSuccessTombstone = R"SQL(
                          AND NOT EXISTS (SELECT 1 FROM idem.retired_keys t
                                           WHERE t.biz_type = d.biz_type AND t.biz_id = d.biz_id
                                             AND t.status = 'SUCCESS'))SQL";

// Whether the schema has retention's tombstones (version 2): asked at every reconciliation, so
// that an upgrade in place while the exporter runs is followed without a restart.
constexpr const char* kHasTombstones = "SELECT to_regclass('idem.retired_keys') IS NOT NULL";

// Records that became SUCCESS in the window (records_by_updated range), each probed for a DEBIT
// or CAPTURE flow of its business object (fund_flows_by_biz).
constexpr const char* kSuccessWithoutDebit = R"SQL(
SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM idem.fund_flows f
                                           WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                                             AND f.kind IN ('DEBIT', 'CAPTURE')))
  FROM idem.records r
 WHERE r.updated_at >= now() - $2::interval
   AND r.updated_at < now() - $3::interval
   AND r.status = 'SUCCESS'
   AND r.biz_type = ANY($1::text[])
)SQL";

std::string debitWithoutSuccessQuery(bool tombstones) {
  std::string sql(kDebitWithoutSuccess);
  const std::string_view placeholder = "%TOMBSTONE%";
  sql.replace(sql.find(placeholder), placeholder.size(),
              tombstones ? std::string(kSuccessTombstone) : std::string());
  return sql;
}

std::string intervalText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " milliseconds";
}

}  // namespace

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

ReconciliationCollector::ReconciliationCollector(ReconciliationSettings settings)
    : settings_(std::move(settings)) {}

void ReconciliationCollector::update(pqxx::connection& connection) {
  pqxx::nontransaction tx(connection);
  const std::string bizTypes = textArrayLiteral(settings_.bizTypes);
  const bool tombstones = tx.exec1(kHasTombstones)[0].as<bool>();
  const double debits =
      tx.exec_params1(debitWithoutSuccessQuery(tombstones), bizTypes,
                      intervalText(settings_.window), intervalText(settings_.grace))[0]
          .as<double>();
  const double successes =
      tx.exec_params1(kSuccessWithoutDebit, bizTypes, intervalText(settings_.window),
                      intervalText(settings_.grace))[0]
          .as<double>();
  const double now = tx.exec1("SELECT extract(epoch FROM now())::float8")[0].as<double>();
  std::lock_guard lock(mutex_);
  debitWithoutSuccess_ = debits;
  successWithoutDebit_ = successes;
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
          const ExporterOptions& o = c.options;
          return std::make_unique<ReconciliationCollector>(ReconciliationSettings{
              o.reconcileInterval, o.reconcileWindow, o.reconcileGrace, o.reconcileBizTypes});
        },
});

}  // namespace idem::exporter

#include "collectors/reconciliation_collector.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/duration.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// Both questions set aside in one hash join what is plainly fine in the window and probe the rest
// by index (sql/migrations/013_charged_objects.sql says how): counting their rows costs little more
// than reading the window once, however long the tables are (bench/money prints the plans).
constexpr const char* kMismatches = R"SQL(
SELECT (SELECT count(*) FROM idem.money_moved_without_success($1::text[], $2::interval,
                                                              $3::interval))::float8,
       (SELECT count(*) FROM idem.success_without_money_moved($1::text[], $2::interval,
                                                              $3::interval))::float8,
       extract(epoch FROM now())::float8
)SQL";

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

void ReconciliationCollector::update(pqxx::connection& connection) {
  idem::ReadTransaction tx(connection);
  requireMoneyQuestion(tx, "idem.money_moved_without_success(text[],interval,interval)");
  const pqxx::row counts =
      tx.exec_params1(kMismatches, bizTypesParameter(), windowParameter(), graceParameter());
  tx.commit();
  std::lock_guard lock(mutex_);
  debitWithoutSuccess_ = counts[0].as<double>();
  successWithoutDebit_ = counts[1].as<double>();
  lastSuccess_ = counts[2].as<double>();
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
          return std::make_unique<ReconciliationCollector>(ReconciliationSettings::from(c.options));
        },
});

}  // namespace idem::exporter

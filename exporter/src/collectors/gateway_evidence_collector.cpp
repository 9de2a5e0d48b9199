#include "collectors/gateway_evidence_collector.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/command_line.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

constexpr const char* kHasStatements = "SELECT to_regclass('idem.statement_lines') IS NOT NULL";
constexpr const char* kHasBookings =
    "SELECT to_regclass('idem.statement_line_bookings') IS NOT NULL";

ReaderLimits withoutWindow(ReaderLimits limits) {
  limits.window = std::chrono::milliseconds(0);  // no ratio reads the lines
  return limits;
}

// Every gateway declared or seen, with the end of its newest final period (NULL: none yet).
constexpr const char* kLastFinal = R"SQL(
SELECT g.gateway,
       extract(epoch FROM (SELECT max(s.period_to) FROM idem.statements AS s
                            WHERE s.gateway = g.gateway AND s.final))::float8
  FROM idem.gateways AS g
)SQL";

// The UNKNOWN records older than each age: one pass over the unsettled ones.
constexpr const char* kUnknownByAge = R"SQL(
SELECT count(*) FILTER (WHERE updated_at <= now() - make_interval(secs => $1))::float8,
       count(*) FILTER (WHERE updated_at <= now() - make_interval(secs => $2))::float8,
       count(*) FILTER (WHERE updated_at <= now() - make_interval(secs => $3))::float8,
       count(*) FILTER (WHERE updated_at <= now() - make_interval(secs => $4))::float8
  FROM idem.records WHERE status = 'UNKNOWN'
)SQL";

constexpr std::string_view kOther = "other";

}  // namespace

GatewayEvidenceCollector::GatewayEvidenceCollector(ReaderLimits limits, ReadStats& stats,
                                                   std::size_t maxGateways)
    : reader_(tableQueries("idem.statement_lines", "gateway, result"), withoutWindow(limits),
              stats.table("statement_lines")),
      bookings_(tableQueries("idem.statement_line_bookings", "gateway, result"),
                withoutWindow(limits), stats.table("statement_line_bookings")),
      maxGateways_(maxGateways) {}

std::string GatewayEvidenceCollector::labelOf(const std::string& gateway) {
  if (gateways_.contains(gateway)) return gateway;
  if (gateways_.size() < maxGateways_) {
    gateways_.insert(gateway);
    return gateway;
  }
  return std::string(kOther);
}

void GatewayEvidenceCollector::take(const pqxx::row& row, RowOrigin origin) {
  const std::string gateway = labelOf(row[2].c_str());
  Results& cells = counts_[gateway];  // the gateway's series exist from its first line
  if (origin == RowOrigin::BeforeStart) return;
  const auto result = tryParse<StatementLineResult>(row[3].c_str());
  if (!result) {
    logWarn(std::string("a statement line's row (id ") + row[0].c_str() + "): unknown result '" +
            row[3].c_str() + "', not counted");
    return;
  }
  ++cells[static_cast<std::size_t>(*result)];
}

void GatewayEvidenceCollector::update(pqxx::connection& connection) {
  if (!schemaChecked_) {
    idem::ReadTransaction tx(connection);
    const bool present = tx.exec1(kHasStatements)[0].as<bool>();
    tx.commit();
    if (!present) {
      throw std::runtime_error(
          "the database's schema has no idem.statement_lines yet "
          "(sql/migrations/015_gateway_evidence.sql): migrate it (idemctl migrate)");
    }
    schemaChecked_ = true;
  }
  if (!hasBookings_) {
    idem::ReadTransaction tx(connection);
    hasBookings_ = tx.exec1(kHasBookings)[0].as<bool>();
    tx.commit();
  }
  std::map<std::string, double> lastFinal;
  std::array<double, kAges.size()> unknown{};
  {
    idem::ReadTransaction tx(connection);
    for (const pqxx::row& row : tx.exec(kLastFinal)) {
      const std::string gateway = labelOf(row[0].c_str());
      counts_[gateway];
      double& end = lastFinal[gateway];
      if (!row[1].is_null()) end = std::max(end, row[1].as<double>());
    }
    const pqxx::row ages = tx.exec_params1(kUnknownByAge, kAges[0].second, kAges[1].second,
                                           kAges[2].second, kAges[3].second);
    for (std::size_t i = 0; i < kAges.size(); ++i)
      unknown[i] = ages[static_cast<int>(i)].as<double>();
    tx.commit();
  }
  const auto sink = [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); };
  const auto publish = [&, this] {
    std::lock_guard lock(mutex_);
    published_ = counts_;
    lastFinalEnd_ = lastFinal;
    unknownOlderThan_ = unknown;
  };
  // Each row a line's import or its later booking: the same cells, each row once. The lines
  // first, so that a failing read of the bookings does not hold their count back.
  reader_.pollAndPublish(connection, sink, publish);
  if (hasBookings_) bookings_.pollAndPublish(connection, sink, publish);
}

void GatewayEvidenceCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto lines = makeFamily("idempotency_statement_lines_total",
                          "Lines of gateways' statements imported since the exporter started, by "
                          "what matching found when they were imported (a pending line again "
                          "when a later file books it): matched, mismatched "
                          "(amount, currency or kind disagree), unmatched (money no record "
                          "explains), duplicate (a second side effect of one object), not_a_flow "
                          "(fees, payouts), pending (not booked yet).",
                          prometheus::MetricType::Counter);
  auto lastFinal = makeFamily("idempotency_statement_last_final_period_end_seconds",
                              "End of the newest period a gateway's imported statements declare "
                              "final, as Unix time; 0 while none has arrived.",
                              prometheus::MetricType::Gauge);
  auto unknown = makeFamily("idempotency_unknown_records",
                            "Records UNKNOWN for longer than older_than (since their last "
                            "change), as of the last collection: what neither the claimant nor "
                            "the gateway's word has decided yet.",
                            prometheus::MetricType::Gauge);
  std::lock_guard lock(mutex_);
  for (const auto& [gateway, cells] : published_) {
    for (StatementLineResult r : allValues<StatementLineResult>()) {
      addSample(lines, {{"gateway", gateway}, {"result", std::string(format(r))}},
                static_cast<double>(cells[static_cast<std::size_t>(r)]));
    }
  }
  for (const auto& [gateway, end] : lastFinalEnd_)
    addSample(lastFinal, {{"gateway", gateway}}, end);
  for (std::size_t i = 0; i < kAges.size(); ++i)
    addSample(unknown, {{"older_than", kAges[i].first}}, unknownOlderThan_[i]);
  out.push_back(std::move(lines));
  out.push_back(std::move(lastFinal));
  out.push_back(std::move(unknown));
}

// The gateway evidence collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector(
    {.name = "gateway_evidence",
     .order = 70,
     .tables = {"statement_lines", "statement_line_bookings"},
     .declareFlags =
         [](CommandLine& cli, ExporterOptions& o) {
           cli.integer("max-gateways", "N",
                       "gateway label values kept; further gateways count as \"other\"",
                       o.maxGateways, 1, 1'000);
         },
     .make =
         [](const CollectorContext& c) {
           return std::make_unique<GatewayEvidenceCollector>(c.reader, c.readStats,
                                                             c.options.maxGateways);
         }});

}  // namespace idem::exporter

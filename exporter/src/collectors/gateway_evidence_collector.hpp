// The gateway's evidence: idem.statement_lines counted as they are imported, by gateway and what
// matching found (idempotency_statement_lines_total{gateway,result}), and a pending line again
// when a later file books it (idem.statement_line_bookings, what the booking found); the end of
// each gateway's newest final statement period
// (idempotency_statement_last_final_period_end_seconds{gateway}, 0 while none: the alert on a
// statement that has not arrived reads it); and the UNKNOWN records still waiting, by age
// (idempotency_unknown_records{older_than}). Gateways are labels bounded like currencies: the first
// --max-currencies names seen, then "other".
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "collectors/collector.hpp"
#include "idem/vocabulary.hpp"
#include "incremental_reader.hpp"

namespace idem::exporter {

class GatewayEvidenceCollector : public Collector {
 public:
  GatewayEvidenceCollector(ReaderLimits limits, ReadStats& stats, std::size_t maxGateways);

  std::string_view name() const override { return "gateway_evidence"; }
  void update(pqxx::connection& connection) override;
  std::vector<IncrementalReader*> readers() override { return {&reader_, &bookings_}; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

  // The ages idempotency_unknown_records counts beyond, as labels and seconds.
  static constexpr std::array<std::pair<const char*, int>, 4> kAges{
      {{"0s", 0}, {"1h", 3'600}, {"24h", 86'400}, {"7d", 604'800}}};

 private:
  using Results = std::array<std::uint64_t, allValues<StatementLineResult>().size()>;

  void take(const pqxx::row& row, RowOrigin origin);

  // A gateway's label: its name among the first maxGateways seen, else "other".
  std::string labelOf(const std::string& gateway);

  IncrementalReader reader_;
  IncrementalReader bookings_;
  std::size_t maxGateways_;
  std::set<std::string> gateways_;         // collection thread only
  std::map<std::string, Results> counts_;  // collection thread only
  mutable std::mutex mutex_;
  std::map<std::string, Results> published_;
  std::map<std::string, double> lastFinalEnd_;
  std::array<double, kAges.size()> unknownOlderThan_{};
  bool schemaChecked_ = false;
  bool hasBookings_ = false;  // a schema before the bookings has no pending line booked later
};

}  // namespace idem::exporter

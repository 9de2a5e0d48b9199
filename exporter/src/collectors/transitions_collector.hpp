// Transitions: idem.transitions, the history of every status change, written by the database's
// trigger. Publishes idempotency_transitions_total{from,to,actor_kind}; from is "none" for a
// record's creation. The series of the transitions the state machine allows (transition_table.hpp)
// exist from the first scrape; any other combination the history holds (a version-1 database's
// UNKNOWN -> FAILED by the system, say) appears when counted.
#pragma once

#include <array>
#include <mutex>

#include "collectors/collector.hpp"
#include "collectors/transition_table.hpp"
#include "incremental_reader.hpp"

namespace idem::exporter {

class TransitionsCollector : public Collector {
 public:
  TransitionsCollector(ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "transitions"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  using Cells = std::array<std::uint64_t, TransitionCells::kCount>;

  void take(const pqxx::row& row, RowOrigin origin);

  IncrementalReader reader_;
  Cells counts_{};  // collection thread only
  mutable std::mutex mutex_;
  Cells published_{};
};

}  // namespace idem::exporter

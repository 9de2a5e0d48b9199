// Transitions: idem.transitions, the history of every status change, written by the database's
// trigger. Publishes idempotency_transitions_total{from,to,actor_kind}; from is "none" for a
// record's creation. The series of the transitions the state machine allows
// (idem.transition_allowed, read from the database once per session) exist from the first scrape;
// any other combination the history holds (a version-1 record's UNKNOWN -> FAILED by the system,
// say) appears when counted. And idempotency_unknown_resolved_total{by}: the UNKNOWN records
// decided, by what decided them (the evidence's source).
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
  std::vector<IncrementalReader*> readers() override { return {&reader_}; }
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  using Cells = std::array<std::uint64_t, TransitionCells::kCount>;

  using Shown = std::array<bool, TransitionCells::kCount>;
  using Deciders = std::array<std::uint64_t, allValues<EvidenceSource>().size()>;

  void readStateMachine(pqxx::connection& connection);
  void take(const pqxx::row& row, RowOrigin origin);

  IncrementalReader reader_;
  Cells counts_{};              // collection thread only
  Deciders unknownResolved_{};  // collection thread only
  mutable std::mutex mutex_;
  Cells published_{};
  Deciders publishedUnknownResolved_{};
  Shown shownFromStart_{};       // grows only: a series once shown stays
  int stateMachineSession_ = 0;  // the backend pid the state machine was read in; collection thread
};

}  // namespace idem::exporter

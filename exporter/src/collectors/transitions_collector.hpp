// Transitions: idem.transitions, the history of every status change, written by the database's
// trigger. Publishes idempotency_transitions_total{from,to,actor_kind}; from is "none" for a
// record's creation.
#pragma once

#include <array>
#include <mutex>

#include "collectors/collector.hpp"
#include "incremental_reader.hpp"

namespace idem::exporter {

class TransitionsCollector : public Collector {
 public:
  TransitionsCollector(ReaderLimits limits, ReadStats& stats);

  std::string_view name() const override { return "transitions"; }
  void update(pqxx::connection& connection) override;
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

 private:
  static constexpr std::size_t kFrom = 5;  // none, then the four statuses
  static constexpr std::size_t kTo = 4;
  static constexpr std::size_t kActors = 2;
  using Cells = std::array<std::uint64_t, kFrom * kTo * kActors>;

  void take(const pqxx::row& row, RowOrigin origin);

  IncrementalReader reader_;
  Cells counts_{};  // collection thread only
  mutable std::mutex mutex_;
  Cells published_{};
};

}  // namespace idem::exporter

// What the incremental readers did, per table: rows read and the fate of the gaps they tracked.
// Written by the collection thread, read by scrapes; atomics, so neither side waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace idem::exporter {

struct TableReadStats {
  explicit TableReadStats(std::string t) : table(std::move(t)) {}
  const std::string table;
  std::atomic<std::uint64_t> rowsRead{0};
  std::atomic<std::int64_t> openGaps{0};
  std::atomic<std::uint64_t> gapsFilled{0};   // the row committed late and was counted
  std::atomic<std::uint64_t> gapsExpired{0};  // proven never to fill (rollback, ON CONFLICT)
  // Collections that read no new rows because --max-tracked-gaps ranges awaited theirs.
  std::atomic<std::uint64_t> readsDeferred{0};
};

class ReadStats {
 public:
  explicit ReadStats(const std::vector<std::string>& tables);
  // Throws std::out_of_range for a table not given at construction.
  TableReadStats& table(std::string_view name);
  const std::deque<TableReadStats>& tables() const { return tables_; }

 private:
  std::deque<TableReadStats> tables_;  // deque: stable addresses, atomics are not movable
};

}  // namespace idem::exporter

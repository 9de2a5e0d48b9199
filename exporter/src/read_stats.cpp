#include "read_stats.hpp"

#include <stdexcept>

namespace idem::exporter {

ReadStats::ReadStats(const std::vector<std::string>& tables) {
  for (const std::string& t : tables) tables_.emplace_back(t);
}

TableReadStats& ReadStats::table(std::string_view name) {
  for (TableReadStats& t : tables_) {
    if (t.table == name) return t;
  }
  throw std::out_of_range("no read statistics for table " + std::string(name));
}

}  // namespace idem::exporter

// The exporter's own health: whether the last collection reached the database, how long
// collections take, errors by stage, when the last complete collection succeeded, rows read and
// the gaps the incremental readers track, and build_info. Fed by the collection loop and the
// readers' statistics; it reads no table itself.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "read_stats.hpp"

namespace idem::exporter {

class SelfHealthCollector : public Collector {
 public:
  SelfHealthCollector(const ReadStats& readStats, const BizTypes& bizTypes,
                      std::vector<std::string> stages);

  std::string_view name() const override { return "self_health"; }
  void update(pqxx::connection&) override {}
  void collect(std::vector<prometheus::MetricFamily>& out) const override;

  // Called by the collection loop.
  void recordError(const std::string& stage);
  void recordCollection(std::chrono::duration<double> duration, bool reachedDatabase,
                        bool succeeded);
  void setDatabaseUp(bool up);

 private:
  const ReadStats& readStats_;
  const BizTypes& bizTypes_;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> errors_;
  bool dbUp_ = false;
  double lastSuccess_ = 0;
  std::vector<std::uint64_t> buckets_;  // cumulative counts per upper bound
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace idem::exporter

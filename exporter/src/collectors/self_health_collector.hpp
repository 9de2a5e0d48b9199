// The exporter's own health: whether the last collection reached the database, how long
// collections take, errors by stage, each collector's last duration and success (as
// node_exporter's node_scrape_collector_* do), whether the database is a hot standby and how far
// its replay lags, its WAL timeline, when the last complete collection succeeded, rows read and the
// gaps the incremental readers track, how often and since when the counts started afresh, and
// build_info. Fed by the collection loop and the
// readers' statistics; it reads no table itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
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
  // One collector's last update: how long it took and whether it succeeded.
  void recordCollector(const std::string& name, std::chrono::duration<double> duration,
                       bool succeeded);
  // What the connected server is: a standby's replay lag in seconds (nullopt when unknown), or a
  // primary's (no lag).
  void setStandby(bool standby, std::optional<double> replayLagSeconds);
  // The connected server's WAL timeline.
  void setTimeline(std::int64_t timeline);
  // The counts started afresh (CollectorSet::restartCounts): now.
  void recordCountRestart();

  // For the landing page: "a primary", "a hot standby (replay lag 0.2 s)", "not reached yet".
  std::string databaseRole() const;

 private:
  const ReadStats& readStats_;
  const BizTypes& bizTypes_;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> errors_;
  struct CollectorRun {
    double seconds = 0;
    bool succeeded = false;
  };
  std::map<std::string, CollectorRun> collectorRuns_;
  std::optional<bool> standby_;  // unknown before the first connection
  std::optional<double> replayLag_;
  std::optional<std::int64_t> timeline_;
  std::uint64_t countRestarts_ = 0;
  double countingSince_;
  bool dbUp_ = false;
  double lastSuccess_ = 0;
  std::vector<std::uint64_t> buckets_;  // cumulative counts per upper bound
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace idem::exporter

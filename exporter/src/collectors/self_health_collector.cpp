#include "collectors/self_health_collector.hpp"

#include <cstdio>

#include "idem/build_info.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

const std::vector<double> kDurationBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                          0.25,  0.5,    1,     2.5,  5,     10};

}  // namespace

SelfHealthCollector::SelfHealthCollector(const ReadStats& readStats, const BizTypes& bizTypes,
                                         std::vector<std::string> stages)
    : readStats_(readStats), bizTypes_(bizTypes), buckets_(kDurationBounds.size(), 0) {
  for (std::string& s : stages) errors_.emplace(std::move(s), 0);
}

void SelfHealthCollector::recordError(const std::string& stage) {
  std::lock_guard lock(mutex_);
  ++errors_[stage];
}

void SelfHealthCollector::setDatabaseUp(bool up) {
  std::lock_guard lock(mutex_);
  dbUp_ = up;
}

void SelfHealthCollector::recordCollector(const std::string& name,
                                          std::chrono::duration<double> duration, bool succeeded) {
  std::lock_guard lock(mutex_);
  collectorRuns_[name] = CollectorRun{duration.count(), succeeded};
}

void SelfHealthCollector::setStandby(bool standby, std::optional<double> replayLagSeconds) {
  std::lock_guard lock(mutex_);
  standby_ = standby;
  replayLag_ = standby ? replayLagSeconds : std::nullopt;
}

std::string SelfHealthCollector::databaseRole() const {
  std::lock_guard lock(mutex_);
  if (!standby_) return "not reached yet";
  if (!*standby_) return "a primary";
  if (!replayLag_) return "a hot standby (replay lag unknown)";
  char lag[32];
  std::snprintf(lag, sizeof lag, "%.1f", *replayLag_);
  return std::string("a hot standby (replay lag ") + lag + " s)";
}

void SelfHealthCollector::recordCollection(std::chrono::duration<double> duration,
                                           bool reachedDatabase, bool succeeded) {
  std::lock_guard lock(mutex_);
  dbUp_ = reachedDatabase;
  const double seconds = duration.count();
  ++count_;
  sum_ += seconds;
  for (std::size_t i = 0; i < kDurationBounds.size(); ++i) {
    if (seconds <= kDurationBounds[i]) ++buckets_[i];
  }
  if (succeeded) {
    lastSuccess_ =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
}

void SelfHealthCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  auto dbUp = makeFamily("idempotency_exporter_db_up",
                         "1 when the last collection reached the database, 0 otherwise.",
                         MetricType::Gauge);
  auto duration = makeFamily("idempotency_exporter_collect_duration_seconds",
                             "Duration of collections (all collectors due, one after another).",
                             MetricType::Histogram);
  auto errors = makeFamily("idempotency_exporter_collect_errors_total",
                           "Failed collection steps by stage (connect or a collector's name).",
                           MetricType::Counter);
  auto collectorDuration =
      makeFamily("idempotency_exporter_collector_duration_seconds",
                 "How long each collector's last update took.", MetricType::Gauge);
  auto collectorSuccess = makeFamily(
      "idempotency_exporter_collector_success",
      "Whether each collector's last update succeeded (1) or failed (0).", MetricType::Gauge);
  auto standby = makeFamily("idempotency_exporter_db_standby",
                            "1 when the database is a hot standby (in recovery), 0 on a primary; "
                            "absent before the first connection.",
                            MetricType::Gauge);
  auto replayLag = makeFamily("idempotency_exporter_replay_lag_seconds",
                              "On a hot standby, how far its replay is behind the primary: 0 when "
                              "it has replayed all it received, else the age of the last replayed "
                              "commit. Absent on a primary.",
                              MetricType::Gauge);
  auto last = makeFamily("idempotency_exporter_last_collect_success_timestamp_seconds",
                         "When the last collection in which every collector succeeded ended, "
                         "seconds since the epoch; 0 before the first.",
                         MetricType::Gauge);
  auto rows = makeFamily("idempotency_exporter_rows_read_total",
                         "Rows the incremental readers fetched, by table (new rows, late rows of "
                         "gaps and the ratio window read at start).",
                         MetricType::Counter);
  auto gaps = makeFamily("idempotency_exporter_open_gaps",
                         "Ids below the high-water mark whose rows are not visible yet (running or "
                         "rolled-back transactions), by table, as of the last collection.",
                         MetricType::Gauge);
  auto resolved = makeFamily("idempotency_exporter_gaps_resolved_total",
                             "Gaps no longer tracked, by table and resolution: filled (the row "
                             "committed late and was counted), expired (proven never to fill), "
                             "abandoned (over --max-tracked-gaps; a late row would be missed).",
                             MetricType::Counter);
  auto overflow = makeFamily("idempotency_exporter_biz_types_overflow_total",
                             "Rows (requests, fund flows) counted under biz_type=\"other\" "
                             "because --max-biz-types distinct biz types were already kept.",
                             MetricType::Counter);
  addSample(overflow, {}, static_cast<double>(bizTypes_.overflowRows()));
  auto build =
      makeFamily("idempotency_exporter_build_info",
                 "Version and git revision of idemwatch-exporter; always 1.", MetricType::Gauge);
  {
    std::lock_guard lock(mutex_);
    addSample(dbUp, {}, dbUp_ ? 1 : 0);
    addHistogram(duration, {}, kDurationBounds, buckets_, count_, sum_);
    for (const auto& [stage, n] : errors_)
      addSample(errors, {{"stage", stage}}, static_cast<double>(n));
    addSample(last, {}, lastSuccess_);
    for (const auto& [name, run] : collectorRuns_) {
      addSample(collectorDuration, {{"collector", name}}, run.seconds);
      addSample(collectorSuccess, {{"collector", name}}, run.succeeded ? 1 : 0);
    }
    if (standby_) addSample(standby, {}, *standby_ ? 1 : 0);
    if (replayLag_) addSample(replayLag, {}, *replayLag_);
  }
  for (const TableReadStats& t : readStats_.tables()) {
    addSample(rows, {{"table", t.table}}, static_cast<double>(t.rowsRead.load()));
    addSample(gaps, {{"table", t.table}}, static_cast<double>(t.openGaps.load()));
    addSample(resolved, {{"table", t.table}, {"resolution", "filled"}},
              static_cast<double>(t.gapsFilled.load()));
    addSample(resolved, {{"table", t.table}, {"resolution", "expired"}},
              static_cast<double>(t.gapsExpired.load()));
    addSample(resolved, {{"table", t.table}, {"resolution", "abandoned"}},
              static_cast<double>(t.gapsAbandoned.load()));
  }
  addSample(build, {{"version", IDEMWATCH_VERSION}, {"revision", buildRevision()}}, 1);
  for (auto* f : {&dbUp, &duration, &errors, &last, &rows, &gaps, &resolved, &overflow, &build}) {
    out.push_back(std::move(*f));
  }
  // These appear with their first sample: a collector's first update, the first connection, a
  // standby.
  for (auto* f : {&collectorDuration, &collectorSuccess, &standby, &replayLag}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
}

}  // namespace idem::exporter

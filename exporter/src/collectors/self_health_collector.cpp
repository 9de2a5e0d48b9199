#include "collectors/self_health_collector.hpp"

#include <array>
#include <cstdio>

#include "idem/build_info.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

const std::vector<double> kDurationBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                          0.25,  0.5,    1,     2.5,  5,     10};

using prometheus::MetricType;

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
using enum prometheus::MetricType;

enum Family : std::size_t {
  kDbUp,
  kDuration,
  kErrors,
  kLastSuccess,
  kRowsRead,
  kOpenGaps,
  kGapsResolved,
  kReadsDeferred,
  kBizTypesOverflow,
  kBuildInfo,
  kCollectorDuration,
  kCollectorSuccess,
  kStandby,
  kReplayLag,
  kCountRestarts,
  kCountingSince,
  kTimeline,
  kFamilyCount
};

struct FamilyText {
  Family family;
  const char* name;
  const char* help;
  MetricType type;
};

// The families, in the order a scrape lists them: those always there, then those that appear
// with their first sample (a collector's first update, the first connection, a standby).
constexpr std::array<FamilyText, 12> kAlwaysPublished{{
    {kDbUp, "idempotency_exporter_db_up",
     "1 when the last collection reached the database, 0 otherwise.", Gauge},
    {kDuration, "idempotency_exporter_collect_duration_seconds",
     "Duration of collections (all collectors due, one after another).", Histogram},
    {kErrors, "idempotency_exporter_collect_errors_total",
     "Failed collection steps by stage (connect or a collector's name).", Counter},
    {kLastSuccess, "idempotency_exporter_last_collect_success_timestamp_seconds",
     "When the last collection in which every collector succeeded ended, seconds since the epoch; "
     "0 before the first.",
     Gauge},
    {kRowsRead, "idempotency_exporter_rows_read_total",
     "Rows the incremental readers fetched, by table (new rows, late rows of gaps and the ratio "
     "window read at start).",
     Counter},
    {kOpenGaps, "idempotency_exporter_open_gaps",
     "Ids below the high-water mark whose rows are not visible yet (running or rolled-back "
     "transactions), by table, as of the last collection.",
     Gauge},
    {kGapsResolved, "idempotency_exporter_gaps_resolved_total",
     "Gaps no longer tracked, by table and resolution: filled (the row committed late and was "
     "counted), expired (proven never to fill).",
     Counter},
    {kReadsDeferred, "idempotency_exporter_reads_deferred_total",
     "Collections that read no new rows of a table because --max-tracked-gaps ranges of ids "
     "awaited their rows (a writer burning ids, long transactions): the new rows wait, none is "
     "lost.",
     Counter},
    {kBizTypesOverflow, "idempotency_exporter_biz_types_overflow_total",
     "Rows (requests, fund flows) counted under biz_type=\"other\" because --max-biz-types "
     "distinct biz types were already kept.",
     Counter},
    {kBuildInfo, "idempotency_exporter_build_info",
     "Version and git revision of idemwatch-exporter; always 1.", Gauge},
    {kCountRestarts, "idempotency_exporter_count_restarts_total",
     "Times the counts started afresh because the server behind the connection lacked rows "
     "already counted (a failover to an asynchronous standby, a crash with synchronous_commit "
     "off): acknowledged writes were lost.",
     Counter},
    {kCountingSince, "idempotency_exporter_counting_since_timestamp_seconds",
     "When the counters now published started from zero: the exporter's start or the last count "
     "restart, seconds since the epoch.",
     Gauge},
}};
constexpr std::array<FamilyText, 5> kPublishedWithFirstSample{{
    {kCollectorDuration, "idempotency_exporter_collector_duration_seconds",
     "How long each collector's last update took.", Gauge},
    {kCollectorSuccess, "idempotency_exporter_collector_success",
     "Whether each collector's last update succeeded (1) or failed (0).", Gauge},
    {kStandby, "idempotency_exporter_db_standby",
     "1 when the database is a hot standby (in recovery), 0 on a primary; absent before the first "
     "connection.",
     Gauge},
    {kReplayLag, "idempotency_exporter_replay_lag_seconds",
     "On a hot standby, how far its replay is behind the primary: 0 when it has replayed all it "
     "received, else the age of the last replayed commit. Absent on a primary.",
     Gauge},
    {kTimeline, "idempotency_exporter_db_timeline",
     "The WAL timeline of the server behind the connection (a promotion starts a new one); "
     "absent before the first connection.",
     Gauge},
}};

// So that no family's samples are built and never published.
constexpr bool eachFamilyListedOnce() {
  std::array<int, kFamilyCount> listed{};
  for (const FamilyText& t : kAlwaysPublished) ++listed[t.family];
  for (const FamilyText& t : kPublishedWithFirstSample) ++listed[t.family];
  for (int n : listed) {
    if (n != 1) return false;
  }
  return true;
}
static_assert(eachFamilyListedOnce());

}  // namespace

SelfHealthCollector::SelfHealthCollector(const ReadStats& readStats, const BizTypes& bizTypes,
                                         std::vector<std::string> stages)
    : readStats_(readStats),
      bizTypes_(bizTypes),
      countingSince_(unixNow()),
      buckets_(kDurationBounds.size(), 0) {
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

void SelfHealthCollector::setTimeline(std::int64_t timeline) {
  std::lock_guard lock(mutex_);
  timeline_ = timeline;
}

void SelfHealthCollector::recordCountRestart() {
  std::lock_guard lock(mutex_);
  ++countRestarts_;
  countingSince_ = unixNow();
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
  if (succeeded) lastSuccess_ = unixNow();
}

void SelfHealthCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  std::array<prometheus::MetricFamily, kFamilyCount> f;
  for (const FamilyText& t : kAlwaysPublished) f[t.family] = makeFamily(t.name, t.help, t.type);
  for (const FamilyText& t : kPublishedWithFirstSample) {
    f[t.family] = makeFamily(t.name, t.help, t.type);
  }
  addSample(f[kBizTypesOverflow], {}, static_cast<double>(bizTypes_.overflowRows()));
  {
    std::lock_guard lock(mutex_);
    addSample(f[kDbUp], {}, dbUp_ ? 1 : 0);
    addHistogram(f[kDuration], {}, kDurationBounds, buckets_, count_, sum_);
    for (const auto& [stage, n] : errors_)
      addSample(f[kErrors], {{"stage", stage}}, static_cast<double>(n));
    addSample(f[kLastSuccess], {}, lastSuccess_);
    for (const auto& [name, run] : collectorRuns_) {
      addSample(f[kCollectorDuration], {{"collector", name}}, run.seconds);
      addSample(f[kCollectorSuccess], {{"collector", name}}, run.succeeded ? 1 : 0);
    }
    if (standby_) addSample(f[kStandby], {}, *standby_ ? 1 : 0);
    if (replayLag_) addSample(f[kReplayLag], {}, *replayLag_);
    addSample(f[kCountRestarts], {}, static_cast<double>(countRestarts_));
    addSample(f[kCountingSince], {}, countingSince_);
    if (timeline_) addSample(f[kTimeline], {}, static_cast<double>(*timeline_));
  }
  for (const TableReadStats& t : readStats_.tables()) {
    addSample(f[kRowsRead], {{"table", t.table}}, static_cast<double>(t.rowsRead.load()));
    addSample(f[kOpenGaps], {{"table", t.table}}, static_cast<double>(t.openGaps.load()));
    addSample(f[kGapsResolved], {{"table", t.table}, {"resolution", "filled"}},
              static_cast<double>(t.gapsFilled.load()));
    addSample(f[kGapsResolved], {{"table", t.table}, {"resolution", "expired"}},
              static_cast<double>(t.gapsExpired.load()));
    addSample(f[kReadsDeferred], {{"table", t.table}}, static_cast<double>(t.readsDeferred.load()));
  }
  addSample(f[kBuildInfo], {{"version", IDEMWATCH_VERSION}, {"revision", buildRevision()}}, 1);
  for (const FamilyText& t : kAlwaysPublished) out.push_back(std::move(f[t.family]));
  for (const FamilyText& t : kPublishedWithFirstSample) {
    if (!f[t.family].metric.empty()) out.push_back(std::move(f[t.family]));
  }
}

}  // namespace idem::exporter

#include "incremental_reader.hpp"

#include <algorithm>
#include <optional>
#include <pqxx/pqxx>
#include <pqxx/transaction>

#include "idem/bounded_transaction.hpp"
#include "log.hpp"

namespace idem::exporter {
namespace {

// What a gap's proof reads (see the header), in one statement: on a primary, the transactions
// that may be inserting into the relation right now (live lock state, not MVCC data: read outside
// any snapshot a decision depends on), one row each or one row of NULL; on a standby, one row with
// its snapshot's xmin, the xid age of that xmin (xmin + age is the next xid), the commit time of
// the last transaction replayed (NULL when none since it started) and now().
constexpr const char* kProofState = R"SQL(
SELECT s.standby, l.virtualtransaction,
       CASE WHEN s.standby THEN pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())::text END,
       CASE WHEN s.standby
            THEN pg_catalog.age(pg_catalog.xid(pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot()))) END,
       CASE WHEN s.standby THEN extract(epoch FROM pg_catalog.pg_last_xact_replay_timestamp())::float8 END,
       CASE WHEN s.standby THEN extract(epoch FROM now())::float8 END
  FROM (SELECT pg_catalog.pg_is_in_recovery() AS standby) AS s
  LEFT JOIN pg_catalog.pg_locks AS l
    ON NOT s.standby
   AND l.locktype = 'relation'
   AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
   AND l.relation = $1::regclass
   AND l.mode = 'RowExclusiveLock'
   AND l.granted
)SQL";

constexpr const char* kNow = "SELECT extract(epoch FROM now())::float8";

constexpr std::size_t kRecheckChunk = 10'000;

bool disjoint(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return false;
    if (*i < *j)
      ++i;
    else
      ++j;
  }
  return true;
}

}  // namespace

struct IncrementalReader::ServerView {
  bool standby = false;
  std::vector<std::string> holders;  // primary
  std::int64_t xmin = 0;             // standby, and the rest
  std::int64_t nextXid = 0;
  std::optional<double> replayedAt;
  double now = 0;
};

std::string bigintArrayLiteral(std::vector<std::int64_t>::const_iterator begin,
                               std::vector<std::int64_t>::const_iterator end) {
  std::string out = "{";
  for (auto it = begin; it != end; ++it) {
    if (it != begin) out += ',';
    out += std::to_string(*it);
  }
  out += '}';
  return out;
}

TableQueries tableQueries(const std::string& relation, const std::string& columns) {
  const std::string select =
      "SELECT id, extract(epoch FROM created_at)::float8, " + columns + " FROM " + relation;
  TableQueries q;
  q.relation = relation;
  q.rowsAfter = select + " WHERE id > $1 ORDER BY id LIMIT $2";
  q.rowsByIds = select + " WHERE id = ANY($1::bigint[])";
  q.highWater = "SELECT coalesce(max(id), 0) FROM " + relation;
  // min(id + 0), not min(id): the planner would answer min(id) by walking the primary key from the
  // oldest row and filtering on created_at, a full scan on a table of old rows. Written this way it
  // uses the BRIN index on created_at and touches only the recent block ranges.
  q.windowStartId =
      "SELECT min(id + 0) FROM " + relation + " WHERE created_at >= now() - $1::interval";
  return q;
}

IncrementalReader::IncrementalReader(TableQueries queries, ReaderLimits limits,
                                     TableReadStats& stats)
    : queries_(std::move(queries)), limits_(limits), stats_(stats) {}

void IncrementalReader::pollAndPublish(pqxx::connection& connection, const RowSink& sink,
                                       const std::function<void()>& publish) {
  try {
    poll(connection, sink);
  } catch (...) {
    publish();
    throw;
  }
  publish();
}

void IncrementalReader::poll(pqxx::connection& connection, const RowSink& sink) {
  if (!started_) {
    start(connection, sink);
    return;
  }
  try {
    if (!gaps_.empty()) refreshHorizons(connection);
    {
      idem::ReadTransaction tx(connection);
      snapshotTime_ = tx.exec1(kNow)[0].as<double>();
      tx.commit();
    }
    recheckGaps(connection, sink);
    readNewRows(connection, sink);
  } catch (...) {
    publishStats();
    throw;
  }
  publishStats();
}

void IncrementalReader::start(pqxx::connection& connection, const RowSink& sink) {
  // One snapshot for the high-water mark and the rows below it, so that nothing falls between.
  idem::SnapshotRead tx(connection);
  snapshotTime_ = tx.exec1(kNow)[0].as<double>();
  const std::int64_t top = tx.exec1(queries_.highWater)[0].as<std::int64_t>();
  std::int64_t from = top - limits_.startBackfillIds + 1;
  if (limits_.window.count() > 0) {
    const pqxx::row first = tx.exec_params1(
        queries_.windowStartId, std::to_string(limits_.window.count()) + " milliseconds");
    if (!first[0].is_null()) from = std::min(from, first[0].as<std::int64_t>());
  }
  from = std::max<std::int64_t>(from, 1);

  std::vector<Gap> gaps;
  std::int64_t cursor = from - 1;
  std::uint64_t rows = 0;
  while (cursor < top) {
    const pqxx::result batch = tx.exec_params(queries_.rowsAfter, cursor, limits_.batchSize);
    for (const pqxx::row& row : batch) {
      const std::int64_t id = row[0].as<std::int64_t>();
      for (std::int64_t g = cursor + 1; g < id; ++g) gaps.push_back({g, 0});
      sink(row, RowOrigin::BeforeStart);
      cursor = id;
    }
    rows += batch.size();
    if (static_cast<std::int64_t>(batch.size()) < limits_.batchSize) break;
  }
  tx.commit();
  // Only now, with the start complete: a failure above leaves the reader unstarted, to start
  // again from scratch (BeforeStart rows touch no counter, so re-reading them is harmless).
  highWater_ = top;
  gaps_ = std::move(gaps);
  trimGaps();
  started_ = true;
  stats_.rowsRead += rows;
  publishStats();
  logDebug(queries_.relation + ": started at id " + std::to_string(top) + " after reading " +
           std::to_string(rows) + " rows from id " + std::to_string(from) + ", " +
           std::to_string(gaps_.size()) + " gaps");
}

void IncrementalReader::refreshHorizons(pqxx::connection& connection) {
  ServerView view;
  {
    idem::ReadTransaction tx(connection);
    const pqxx::result rows = tx.exec_params(kProofState, queries_.relation);
    tx.commit();
    view.standby = !rows.empty() && rows[0][0].as<bool>();
    for (const pqxx::row& row : rows) {
      if (!row[1].is_null()) view.holders.push_back(row[1].as<std::string>());
    }
    if (view.standby) {
      const pqxx::row& row = rows[0];
      view.xmin = row[2].as<std::int64_t>();
      view.nextXid = view.xmin + row[3].as<std::int64_t>();
      if (!row[4].is_null()) view.replayedAt = row[4].as<double>();
      view.now = row[5].as<double>();
    }
  }
  std::sort(view.holders.begin(), view.holders.end());
  if (view.standby != standby_) restartHorizons(view.standby);
  // Gaps seen in the last poll take a horizon read now, after that poll's snapshots.
  bool assigned = false;
  for (Gap& g : gaps_) {
    if (g.horizon == 0) {
      g.horizon = nextHorizon_;
      assigned = true;
    }
  }
  if (assigned) {
    Horizon h;
    if (view.standby) {
      const std::chrono::duration<double> bound = limits_.standbyStatementBound;
      h.settleAt = view.replayedAt.value_or(view.now) + bound.count();
    } else {
      h.holders = view.holders;
    }
    horizons_[nextHorizon_++] = std::move(h);
  }
  // A horizon passes once every transaction that could have written its gaps has ended; the
  // snapshots taken from now on see everything they wrote.
  for (auto& [id, h] : horizons_) {
    if (h.passed) continue;
    if (!view.standby) {
      h.passed = disjoint(h.holders, view.holders);
      continue;
    }
    if (h.barrier == 0 && view.replayedAt && *view.replayedAt >= h.settleAt)
      h.barrier = view.nextXid;
    h.passed = h.barrier != 0 && view.xmin >= h.barrier;
  }
}

void IncrementalReader::restartHorizons(bool standby) {
  logDebug(queries_.relation + (standby ? ": reading a standby" : ": reading a primary") + "; " +
           std::to_string(gaps_.size()) + " open gap(s) start their proof again");
  for (Gap& g : gaps_) g.horizon = 0;
  horizons_.clear();
  standby_ = standby;
}

void IncrementalReader::recheckGaps(pqxx::connection& connection, const RowSink& sink) {
  if (gaps_.empty()) return;
  // Which gaps may be dropped is decided before the look-ups: their horizon passed before the
  // snapshots below were taken.
  std::vector<std::int64_t> ids;
  ids.reserve(gaps_.size());
  for (const Gap& g : gaps_) ids.push_back(g.id);
  std::vector<std::int64_t> missingAfterPassed;
  for (std::size_t start = 0; start < ids.size(); start += kRecheckChunk) {
    const std::size_t end = std::min(ids.size(), start + kRecheckChunk);
    pqxx::result found;
    {
      idem::ReadTransaction tx(connection);
      found = tx.exec_params(queries_.rowsByIds,
                             bigintArrayLiteral(ids.begin() + static_cast<std::ptrdiff_t>(start),
                                                ids.begin() + static_cast<std::ptrdiff_t>(end)));
      tx.commit();
    }
    // Count and forget the filled gaps together, before the next statement can fail.
    std::vector<std::int64_t> filled;
    for (const pqxx::row& row : found) {
      const std::int64_t id = row[0].as<std::int64_t>();
      const auto it = std::lower_bound(gaps_.begin(), gaps_.end(), id,
                                       [](const Gap& g, std::int64_t v) { return g.id < v; });
      if (it == gaps_.end() || it->id != id) continue;  // defensive: a row we did not ask for
      sink(row, RowOrigin::Late);
      filled.push_back(id);
    }
    std::sort(filled.begin(), filled.end());
    std::erase_if(gaps_, [&](const Gap& g) {
      return std::binary_search(filled.begin(), filled.end(), g.id);
    });
    stats_.rowsRead += found.size();
    stats_.gapsFilled += filled.size();
    for (std::size_t i = start; i < end; ++i) {
      if (!std::binary_search(filled.begin(), filled.end(), ids[i]))
        missingAfterPassed.push_back(ids[i]);
    }
  }
  // Still missing in a snapshot taken after every possible inserter had ended: never to fill.
  std::sort(missingAfterPassed.begin(), missingAfterPassed.end());
  const auto before = gaps_.size();
  std::erase_if(gaps_, [&](const Gap& g) {
    if (g.horizon == 0) return false;
    const auto h = horizons_.find(g.horizon);
    return h != horizons_.end() && h->second.passed &&
           std::binary_search(missingAfterPassed.begin(), missingAfterPassed.end(), g.id);
  });
  stats_.gapsExpired += before - gaps_.size();
  // Forget horizons no gap refers to any more.
  std::erase_if(horizons_, [&](const auto& entry) {
    return std::none_of(gaps_.begin(), gaps_.end(),
                        [&](const Gap& g) { return g.horizon == entry.first; });
  });
}

void IncrementalReader::readNewRows(pqxx::connection& connection, const RowSink& sink) {
  std::int64_t rows = 0;
  while (rows < limits_.maxRowsPerPoll) {
    pqxx::result batch;
    {
      idem::ReadTransaction tx(connection);
      batch = tx.exec_params(queries_.rowsAfter, highWater_, limits_.batchSize);
      tx.commit();
    }
    for (const pqxx::row& row : batch) {
      const std::int64_t id = row[0].as<std::int64_t>();
      addGaps(highWater_, id);
      sink(row, RowOrigin::New);
      highWater_ = id;
    }
    trimGaps();
    stats_.rowsRead += batch.size();
    rows += static_cast<std::int64_t>(batch.size());
    if (static_cast<std::int64_t>(batch.size()) < limits_.batchSize) break;
  }
}

void IncrementalReader::addGaps(std::int64_t from, std::int64_t to) {
  const std::int64_t count = to - from - 1;
  if (count <= 0) return;
  const auto bound = static_cast<std::int64_t>(limits_.maxTrackedGaps);
  if (count > bound) {
    // A jump in the sequence (setval, a crashed bulk load): only the newest ids can matter.
    stats_.gapsAbandoned += static_cast<std::uint64_t>(count - bound);
    from = to - bound - 1;
  }
  for (std::int64_t g = from + 1; g < to; ++g) gaps_.push_back({g, 0});
}

void IncrementalReader::trimGaps() {
  if (gaps_.size() <= limits_.maxTrackedGaps) return;
  const std::size_t excess = gaps_.size() - limits_.maxTrackedGaps;
  gaps_.erase(gaps_.begin(), gaps_.begin() + static_cast<std::ptrdiff_t>(excess));
  stats_.gapsAbandoned += excess;
  logWarn(queries_.relation + ": more than " + std::to_string(limits_.maxTrackedGaps) +
          " ids await their rows; gave up the " + std::to_string(excess) +
          " oldest (see idempotency_exporter_gaps_resolved_total{resolution=\"abandoned\"})");
}

void IncrementalReader::publishStats() {
  stats_.openGaps = static_cast<std::int64_t>(gaps_.size());
}

}  // namespace idem::exporter

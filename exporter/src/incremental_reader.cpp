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

constexpr std::size_t kRecheckChunk = 2'000;  // ranges per statement

bool partitionedByDay(std::string_view relation) {
  return relation.starts_with("idem.") &&
         std::ranges::find(kHistoryTablesByDay, relation.substr(5)) != kHistoryTablesByDay.end();
}

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
  const std::string ids = "SELECT id, extract(epoch FROM created_at)::float8 FROM " + relation;
  TableQueries q;
  q.relation = relation;
  q.rowsAfter = select + " WHERE id > $1 ORDER BY id LIMIT $2";
  q.idsAfter = ids + " WHERE id > $1 ORDER BY id LIMIT $2";
  if (partitionedByDay(relation)) {
    // to_timestamp(float8) is immutable: the planner prunes the partitions before planning them.
    const std::string since = " WHERE id > $1 AND created_at >= to_timestamp($3::float8)";
    q.rowsAfterSince = select + since + " ORDER BY id LIMIT $2";
    q.idsAfterSince = ids + since + " ORDER BY id LIMIT $2";
    q.earliestAfter =
        "SELECT extract(epoch FROM min(created_at))::float8 FROM " + relation + " WHERE id > $1";
  }
  q.rowsInRanges = select +
                   " JOIN unnest($1::bigint[], $2::bigint[]) AS gap(first_id, last_id)"
                   " ON id BETWEEN gap.first_id AND gap.last_id";
  q.highWater = "SELECT coalesce(max(id), 0) FROM " + relation;
  // min(id + 0), not min(id): the planner would answer min(id) by walking the primary key from the
  // oldest row and filtering on created_at, a full scan on a table of old rows. Written this way it
  // uses the BRIN index on created_at and touches only the recent block ranges. The bound is a
  // constant (to_timestamp(float8) is immutable), so a table partitioned by day is planned over
  // the window's days only, not every day it keeps.
  q.windowStartId =
      "SELECT min(id + 0) FROM " + relation + " WHERE created_at >= to_timestamp($1::float8)";
  q.countIds = "SELECT count(*) FROM " + relation + " WHERE id = ANY($1::bigint[])";
  return q;
}

TableQueries joinedTableQueries(const std::string& relation, const std::string& alias,
                                const std::string& columns, const std::string& joins) {
  const std::string select = "SELECT " + alias + ".id, extract(epoch FROM " + alias +
                             ".created_at)::float8, " + columns + " FROM " + relation + " AS " +
                             alias + " " + joins;
  TableQueries q = tableQueries(relation, "NULL");
  q.rowsAfter = select + " WHERE " + alias + ".id > $1 ORDER BY " + alias + ".id LIMIT $2";
  if (partitionedByDay(relation)) {
    q.rowsAfterSince = select + " WHERE " + alias + ".id > $1 AND " + alias +
                       ".created_at >= to_timestamp($3::float8) ORDER BY " + alias + ".id LIMIT $2";
  }
  q.rowsInRanges = select +
                   " JOIN unnest($1::bigint[], $2::bigint[]) AS gap(first_id, last_id)"
                   " ON " +
                   alias + ".id BETWEEN gap.first_id AND gap.last_id";
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
  startWithin(tx, sink);
  tx.commit();
}

void IncrementalReader::startWithin(pqxx::transaction_base& tx, const RowSink& sink) {
  const double now = tx.exec1(kNow)[0].as<double>();
  const std::int64_t top = tx.exec1(queries_.highWater)[0].as<std::int64_t>();
  std::int64_t from = top - limits_.startBackfillIds + 1;
  if (limits_.window.count() > 0) {
    // (A second earlier: the bound goes as a float8 in text, which may round it up.)
    const double windowStart = now - std::chrono::duration<double>(limits_.window).count() - 1.0;
    const pqxx::row first = tx.exec_params1(queries_.windowStartId, windowStart);
    if (!first[0].is_null()) from = std::min(from, first[0].as<std::int64_t>());
  }
  from = std::max<std::int64_t>(from, 1);
  // A table partitioned by day: read from the earliest day any row to read was created on (in
  // this snapshot, so no visible row is passed over), not from the first day the history keeps.
  std::optional<double> since;
  if (!queries_.rowsAfterSince.empty()) {
    const pqxx::row earliest = tx.exec_params1(queries_.earliestAfter, from - 1);
    // (A second earlier: the bound goes as a float8 in text, which may round it up.)
    if (!earliest[0].is_null()) since = earliest[0].as<double>() - 1.0;
  }

  const bool rowsWanted = static_cast<bool>(sink);
  const std::string& after = rowsWanted ? queries_.rowsAfter : queries_.idsAfter;
  const std::string& afterSince = rowsWanted ? queries_.rowsAfterSince : queries_.idsAfterSince;
  std::vector<Gap> gaps;
  std::int64_t cursor = from - 1;
  std::uint64_t rows = 0;
  double topCreatedAt = 0;
  while (cursor < top) {
    const pqxx::result batch = since ? tx.exec_params(afterSince, cursor, limits_.batchSize, *since)
                                     : tx.exec_params(after, cursor, limits_.batchSize);
    for (const pqxx::row& row : batch) {
      const std::int64_t id = row[0].as<std::int64_t>();
      if (id > cursor + 1) gaps.push_back({cursor + 1, id - 1, 0});
      if (rowsWanted) sink(row, RowOrigin::BeforeStart);
      cursor = id;
      if (id == top) topCreatedAt = row[1].as<double>();
    }
    rows += batch.size();
    if (static_cast<std::int64_t>(batch.size()) < limits_.batchSize) break;
  }
  // Only now, with the start complete: a failure above leaves the reader unstarted, to start
  // again from scratch (BeforeStart rows touch no counter, so re-reading them is harmless).
  snapshotTime_ = now;
  highWater_ = top;
  highWaterCreatedAt_ = topCreatedAt;
  gaps_ = std::move(gaps);
  started_ = true;
  stats_.rowsRead += rows;
  publishStats();
  logDebug(queries_.relation + ": started at id " + std::to_string(top) + " after reading " +
           std::to_string(rows) + " rows from id " + std::to_string(from) + ", " +
           std::to_string(gaps_.size()) + " gaps");
}

void IncrementalReader::reset() {
  started_ = false;
  highWater_ = 0;
  gaps_.clear();
  horizons_.clear();
  recent_.clear();
  highWaterCreatedAt_ = 0;
  publishStats();
}

void IncrementalReader::remember(std::int64_t id, double createdAt) {
  if (limits_.recentIds == 0) return;
  if (recent_.size() == limits_.recentIds) recent_.pop_front();
  recent_.push_back({id, createdAt});
}

std::size_t IncrementalReader::serverChanged(pqxx::connection& connection) {
  if (!started_) return 0;
  restartHorizons(standby_);
  const double since = snapshotTime_ - std::chrono::duration<double>(limits_.lossHorizon).count();
  std::vector<std::int64_t> ids;
  for (const Counted& c : recent_) {
    if (c.createdAt >= since) ids.push_back(c.id);
  }
  // The high-water row: counted, or the newest row when the reader started; either way a row
  // this server must have for new ids to come above it.
  if (highWater_ > 0 && highWaterCreatedAt_ >= since) ids.push_back(highWater_);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::size_t found = 0;
  idem::ReadTransaction tx(connection);
  for (std::size_t start = 0; start < ids.size(); start += kRecheckChunk) {
    const auto first = ids.begin() + static_cast<std::ptrdiff_t>(start);
    const auto last =
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), start + kRecheckChunk));
    found +=
        tx.exec_params1(queries_.countIds, bigintArrayLiteral(first, last))[0].as<std::size_t>();
  }
  tx.commit();
  const std::size_t missing = ids.size() - found;
  logDebug(queries_.relation + ": " + std::to_string(ids.size()) +
           " row(s) counted last looked up on the server now behind the connection, " +
           std::to_string(missing) + " missing");
  return missing;
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
  const std::vector<Gap> asked = gaps_;
  std::vector<std::int64_t> filled;
  for (std::size_t start = 0; start < asked.size(); start += kRecheckChunk) {
    const std::size_t end = std::min(asked.size(), start + kRecheckChunk);
    std::vector<std::int64_t> firsts, lasts;
    for (std::size_t i = start; i < end; ++i) {
      firsts.push_back(asked[i].first);
      lasts.push_back(asked[i].last);
    }
    pqxx::result found;
    {
      idem::ReadTransaction tx(connection);
      found =
          tx.exec_params(queries_.rowsInRanges, bigintArrayLiteral(firsts.begin(), firsts.end()),
                         bigintArrayLiteral(lasts.begin(), lasts.end()));
      tx.commit();
    }
    // Count and forget the filled gaps together, before the next statement can fail.
    std::vector<std::int64_t> now;
    for (const pqxx::row& row : found) {
      const std::int64_t id = row[0].as<std::int64_t>();
      if (!awaited(id)) continue;  // defensive: a row we did not ask for, or counted already
      sink(row, RowOrigin::Late);
      remember(id, row[1].as<double>());
      now.push_back(id);
    }
    std::sort(now.begin(), now.end());
    for (std::int64_t id : now) removeGap(id);
    stats_.rowsRead += found.size();
    stats_.gapsFilled += now.size();
    filled.insert(filled.end(), now.begin(), now.end());
  }
  // Still missing in a snapshot taken after every possible inserter had ended: never to fill.
  // The ranges asked whose horizon had passed go whole, less what filled (gone already).
  std::uint64_t expired = 0;
  std::erase_if(gaps_, [&](const Gap& g) {
    if (g.horizon == 0) return false;
    const auto h = horizons_.find(g.horizon);
    if (h == horizons_.end() || !h->second.passed) return false;
    const auto a = std::upper_bound(asked.begin(), asked.end(), g.first,
                                    [](std::int64_t v, const Gap& x) { return v < x.first; });
    const bool wasAsked = a != asked.begin() && std::prev(a)->last >= g.last;
    if (wasAsked) expired += static_cast<std::uint64_t>(g.last - g.first + 1);
    return wasAsked;
  });
  stats_.gapsExpired += expired;
  // Forget horizons no gap refers to any more.
  std::erase_if(horizons_, [&](const auto& entry) {
    return std::none_of(gaps_.begin(), gaps_.end(),
                        [&](const Gap& g) { return g.horizon == entry.first; });
  });
}

bool IncrementalReader::awaited(std::int64_t id) const {
  const auto it = std::upper_bound(gaps_.begin(), gaps_.end(), id,
                                   [](std::int64_t v, const Gap& g) { return v < g.first; });
  return it != gaps_.begin() && std::prev(it)->last >= id;
}

void IncrementalReader::removeGap(std::int64_t id) {
  auto it = std::upper_bound(gaps_.begin(), gaps_.end(), id,
                             [](std::int64_t v, const Gap& g) { return v < g.first; });
  if (it == gaps_.begin()) return;
  --it;
  if (it->last < id) return;
  if (it->first == id && it->last == id) {
    gaps_.erase(it);
  } else if (it->first == id) {
    ++it->first;
  } else if (it->last == id) {
    --it->last;
  } else {
    const Gap after{id + 1, it->last, it->horizon};
    it->last = id - 1;
    gaps_.insert(std::next(it), after);
  }
}

void IncrementalReader::readNewRows(pqxx::connection& connection, const RowSink& sink) {
  std::int64_t rows = 0;
  const bool partitioned = !queries_.rowsAfterSince.empty();
  bool fullRead =
      partitioned && (highWaterCreatedAt_ <= 0 ||
                      snapshotTime_ - lastFullReadAt_ >=
                          std::chrono::duration<double>(limits_.partitionFullReadInterval).count());
  while (rows < limits_.maxRowsPerPoll) {
    if (gapsAtBound()) {
      // Every range awaits a row that may still come: reading on would need more. The new rows
      // wait for a later collection, never a row goes uncounted.
      ++stats_.readsDeferred;
      break;
    }
    pqxx::result batch;
    {
      idem::ReadTransaction tx(connection);
      if (!partitioned || fullRead) {
        batch = tx.exec_params(queries_.rowsAfter, highWater_, limits_.batchSize);
      } else {
        // The last days' partitions only (see ReaderLimits::partitionReadMargin).
        const double newest = std::min(highWaterCreatedAt_, snapshotTime_);
        const double since =
            newest - std::chrono::duration<double>(limits_.partitionReadMargin).count();
        batch = tx.exec_params(queries_.rowsAfterSince, highWater_, limits_.batchSize, since);
        if (!batch.empty() && batch.back()[0].as<std::int64_t>() - highWater_ -
                                      static_cast<std::int64_t>(batch.size()) >
                                  limits_.batchSize) {
          batch = tx.exec_params(queries_.rowsAfter, highWater_, limits_.batchSize);
        }
      }
      tx.commit();
    }
    if (fullRead) {
      lastFullReadAt_ = snapshotTime_;
      fullRead = false;  // one statement opened them all; the rest of the catch-up is bounded
    }
    for (const pqxx::row& row : batch) {
      const std::int64_t id = row[0].as<std::int64_t>();
      addGaps(highWater_, id);
      sink(row, RowOrigin::New);
      remember(id, row[1].as<double>());
      highWater_ = id;
      highWaterCreatedAt_ = row[1].as<double>();
    }
    stats_.rowsRead += batch.size();
    rows += static_cast<std::int64_t>(batch.size());
    if (static_cast<std::int64_t>(batch.size()) < limits_.batchSize) break;
  }
}

void IncrementalReader::addGaps(std::int64_t from, std::int64_t to) {
  if (to - from - 1 <= 0) return;
  gaps_.push_back({from + 1, to - 1, 0});
}

std::size_t IncrementalReader::openGaps() const {
  std::size_t n = 0;
  for (const Gap& g : gaps_) n += static_cast<std::size_t>(g.last - g.first + 1);
  return n;
}

void IncrementalReader::publishStats() {
  stats_.openGaps = static_cast<std::int64_t>(openGaps());
}

}  // namespace idem::exporter

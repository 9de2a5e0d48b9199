// Exactly-once reading of an append-only idem table by its identity column, so that counters
// advance by the rows added since the last collection and never by re-counting a table.
//
// Ids are handed out in order (identity sequences, CACHE 1) but rows become visible in commit
// order, so a read "id > high-water" can pass over an id whose transaction is still running.
// Every id below the high-water mark whose row is not visible is a *gap*, remembered and looked up
// again at each collection (WHERE id = ANY(...)): when its row appears, it is counted then, once.
//
// Some gaps never fill: a rolled-back transaction, or idem.record_fund_flow's INSERT ... ON
// CONFLICT DO NOTHING, which consumes an id without writing a row. A gap is given up only when it
// is proven permanent, by one of two arguments, chosen by where the reader runs: a primary or a hot
// standby (pg_is_in_recovery(), asked at each refresh, so a promotion is noticed; the gaps then
// start a proof of the new kind).
//
// On a primary: the id was taken inside an INSERT into the table, and an inserting transaction
// holds RowExclusiveLock on the table from before it takes the id until it ends. So when a gap is
// first seen, the reader notes the transactions holding that lock (pg_locks, read after the
// snapshot that missed the row); once none of them holds it any more (read before a later
// snapshot), every transaction that could have written the row has ended, and if that later
// snapshot still does not show the row, it never will. Unlike a txid-snapshot horizon, this also
// covers an inserter that had taken the id but not yet been assigned a transaction id.
//
// On a standby, pg_locks shows none of the primary's writers, and pg_current_snapshot() lists no
// running xids there either (a recovery snapshot keeps them in its subxip, which the function does
// not copy; pg_visible_in_snapshot is no help). What a standby does know exactly, in the primary's
// terms: its snapshot's xmin (every xid below it has ended, as replayed), its next xid (one past
// the largest xid replayed: pg_snapshot_xmin + age(xmin)) and the commit time of the last
// transaction it replayed (pg_last_xact_replay_timestamp(), the primary's clock). The proof:
//   1. A gap g is seen below a visible id h. Ids are handed out in order, so the inserter T of g
//      took g before h was taken, hence before h committed, hence no later than t0, the last
//      replayed commit time read after the snapshot that missed g (the standby's now() when it
//      has replayed none since it started).
//   2. T takes its xid at the latest when its INSERT writes the row, within the statement that
//      took g: no BEFORE INSERT trigger runs on these tables, and whatever the statement waits for
//      (an ON CONFLICT arbiter waiting for another inserter), it ends within the bound
//      ReaderLimits::standbyStatementBound (G) of the primary's writers, as statement_timeout
//      bounds idemwatch's own. So T's row, if any, is in WAL generated before t0 + G; with no
//      row (ON CONFLICT DO NOTHING, an error) T never writes g at all.
//   3. Once the standby has replayed a commit stamped at or after t0 + G, it has replayed every
//      WAL record written before it, T's row among them: T's xid is below the standby's next xid
//      read then, the barrier B.
//   4. Once a later snapshot's xmin reaches B, every xid below B has ended, T's among them; a
//      snapshot taken after that shows T's row if T committed it. Still missing: never to fill.
//      (The standby cannot tell T from any other transaction older than B, so every one of them
//      must end: a long transaction on the primary delays the expiry of gaps, never a count.)
// A standby that is restarted keeps the argument (xids and replay times are the primary's); one
// that is promoted ends every transaction it had not replayed to its end, so the gaps restart
// under the primary's argument above. The replay time only moves with the primary's commits: on
// an idle primary a gap waits for the next one, never the other way round.
//
// Gaps are kept as ranges of consecutive ids seen together, so a run of ids that never fill (a
// writer burning ids, a jump in the sequence) costs one entry whatever its length, and each range
// is looked up again whole (id BETWEEN first AND last). The number of ranges is bounded
// (--max-tracked-gaps); at the bound the reader reads no new rows until ranges resolve (each
// collection that waits so is counted: reads_deferred), and it never drops one: a dropped gap
// would be a row never counted, a duplicate charge that never shows.
//
// A failover or a restart may put another server behind the connection (serverChanged()). With
// a synchronous standby it has every row counted, and counting goes on where it was. Promoted
// from an asynchronous standby, or restarted after a crash with synchronous_commit off, it may
// lack the last rows counted; its sequences then hand out their ids again, below the high-water
// mark, where the reader would never look. So the reader keeps the ids it counted last
// (ReaderLimits::recentIds, and the high-water row) and looks up on the new server those created
// within ReaderLimits::lossHorizon before its last poll: one missing says counts taken so far no
// longer describe this database, and the caller starts them afresh (CollectorSet::restartCounts).
// Only recent rows, because only the last writes can be lost so, and older ones may have gone by
// retention on a quiet database.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <pqxx/connection>
#include <pqxx/row>
#include <pqxx/transaction_base>
#include <string>
#include <string_view>
#include <vector>

#include "read_stats.hpp"

namespace idem::exporter {

// The history tables partitioned by the day of created_at, in schema idem
// (sql/migrations/017_history_by_day.sql): their readers read the last days only, and the
// history_partitions collector watches their days ahead. A table partitioned so joins this list.
inline constexpr std::array<std::string_view, 2> kHistoryTablesByDay = {"attempts", "transitions"};

// The statements for one table. Rows have the columns id, created_at (float8 seconds since the
// epoch), then the collector's own.
struct TableQueries {
  std::string relation;   // "idem.attempts", for pg_locks
  std::string rowsAfter;  // $1 id, $2 limit: rows with id > $1 ORDER BY id LIMIT $2
  // A table partitioned by the day of created_at (the history: attempts, transitions), else "":
  // rowsAfter for rows created at or after $3 (seconds since the epoch), so that the read opens
  // the last days' partitions only, however many days the history keeps; and, $1 id, the
  // earliest created_at of the rows above it (NULL when none).
  std::string rowsAfterSince;
  std::string earliestAfter;
  // rowsAfter and rowsAfterSince with the id and created_at columns alone, from the table alone:
  // a start whose caller reads what the rows below the high-water mark say from the definitions
  // reads them only for their ids (the gaps among them), without the columns' lookups.
  std::string idsAfter;
  std::string idsAfterSince;
  std::string rowsInRanges;   // $1, $2 bigint[]: the rows whose id is in [$1[i], $2[i]] for an i
  std::string highWater;      // the largest id visible, 0 when empty
  std::string windowStartId;  // $1 epoch: the smallest id created since, NULL when none
  std::string countIds;       // $1 bigint[]: how many of these ids have a row
};

// The statements of one of the idem tables the collectors read (attempts, transitions, fund
// flows): each row is "id, created_at as epoch seconds, <columns>", and they all read the same way.
TableQueries tableQueries(const std::string& relation, const std::string& columns);
// The same for rows that join other tables: `relation` aliased `alias`, then `joins`, with
// `columns` free to name them ("id, created_at as epoch seconds, <columns>").
TableQueries joinedTableQueries(const std::string& relation, const std::string& alias,
                                const std::string& columns, const std::string& joins);

enum class RowOrigin {
  BeforeStart,  // committed before the exporter started: for the ratio window only
  New,          // committed since the last collection
  Late,         // an id first seen as a gap, whose transaction has now committed
};

struct ReaderLimits {
  std::int64_t batchSize = 2'000;          // rows per statement (bounds the memory a result takes)
  std::int64_t maxRowsPerPoll = 200'000;   // catch up over several collections beyond this
  std::int64_t startBackfillIds = 10'000;  // ids below the start's high-water checked for gaps
  std::size_t maxTrackedGaps = 100'000;
  std::chrono::milliseconds window{0};  // rows created within it are read at start
  // On a standby: the longest an INSERT into these tables runs on the primary (G above).
  std::chrono::milliseconds standbyStatementBound{60'000};
  // The ids counted last, looked up on a server that replaced the one they were read from, when
  // created within lossHorizon before the last poll.
  std::size_t recentIds = 10'000;
  std::chrono::milliseconds lossHorizon{15 * 60'000};
  // A table partitioned by day is read from this long before the newest row read (or the
  // database's now(), when earlier). A row of a transaction that began before that, committed
  // since, is passed over by that read: found as a gap once a later row is read, or by a read of
  // every partition, made at least this often by the database's clock, and counted once either
  // way. Every partition is read too while no row's created_at is known yet, and again for a
  // batch that would leave more ids behind as gaps than a batch holds (rows passed over, not
  // ids in flight: their recheck would be one unbounded statement).
  std::chrono::milliseconds partitionReadMargin{60 * 60'000};
  std::chrono::milliseconds partitionFullReadInterval{60'000};
};

class IncrementalReader {
 public:
  using RowSink = std::function<void(const pqxx::row&, RowOrigin)>;

  IncrementalReader(TableQueries queries, ReaderLimits limits, TableReadStats& stats);

  // One collection. The first call starts the reader: it reads the rows created within the
  // window (BeforeStart) and the ids just below the high-water mark, without a full scan. Throws
  // on database errors; the rows handed to the sink so far are accounted for, so the next poll
  // neither misses nor repeats them.
  void poll(pqxx::connection& connection, const RowSink& sink);

  // The start, inside the caller's snapshot (a repeatable-read transaction), so that what the
  // caller reads in it and what the reader reads later neither overlap nor leave a row out. The
  // reader is started once this returns; the next poll reads what committed after the snapshot.
  // An empty sink: the caller has read in that snapshot all it needs of the rows below the
  // high-water mark, which are then read for their ids only (idsAfter).
  void startWithin(pqxx::transaction_base& tx, const RowSink& sink);
  // Back to unstarted: the next poll starts from scratch (a caller whose start of several readers
  // in one snapshot failed part way).
  void reset();

  // poll, then `publish` what was read, also when poll throws: the rows handed over are
  // consistent (see poll), so a collection cut short still publishes them. Rethrows.
  void pollAndPublish(pqxx::connection& connection, const RowSink& sink,
                      const std::function<void()>& publish);

  // Another server is behind the connection, or the same one on a new timeline or after a
  // restart: the gaps' proofs start again, and the rows counted last (and the high-water row) are
  // looked up on it. Returns how many of them it lacks, 0 when it has them all. Throws on
  // database errors (call again on the next connection).
  std::size_t serverChanged(pqxx::connection& connection);

  // The database's now() at the last poll, seconds since the epoch.
  double snapshotTime() const { return snapshotTime_; }
  std::int64_t highWater() const { return highWater_; }
  // Ids awaited (each range counts its ids).
  std::size_t openGaps() const;
  bool started() const { return started_; }

 private:
  // Ids first..last, all awaited, seen in one poll (one horizon).
  struct Gap {
    std::int64_t first;
    std::int64_t last;
    std::uint32_t horizon;  // 0: not yet assigned
  };
  struct Horizon {
    std::vector<std::string> holders;  // on a primary: virtual transaction ids, sorted
    double settleAt = 0;               // on a standby: t0 + G, the primary's clock
    std::int64_t barrier = 0;          // on a standby: B, once replay passed settleAt; 0 before
    bool passed = false;
  };
  struct ServerView;

  void start(pqxx::connection& connection, const RowSink& sink);
  void refreshHorizons(pqxx::connection& connection);
  // The horizons of the other proof start again (a promotion, or a new server behind the DSN).
  void restartHorizons(bool standby);
  void recheckGaps(pqxx::connection& connection, const RowSink& sink);
  void readNewRows(pqxx::connection& connection, const RowSink& sink);
  // Records ids (from, to) exclusive as one range of gaps.
  void addGaps(std::int64_t from, std::int64_t to);
  bool gapsAtBound() const { return gaps_.size() >= limits_.maxTrackedGaps; }
  bool awaited(std::int64_t id) const;
  void removeGap(std::int64_t id);
  void publishStats();
  void remember(std::int64_t id, double createdAt);

  TableQueries queries_;
  ReaderLimits limits_;
  TableReadStats& stats_;
  bool started_ = false;
  std::int64_t highWater_ = 0;
  double lastFullReadAt_ = 0;  // the database's now() at the last read of every partition
  double snapshotTime_ = 0;
  std::vector<Gap> gaps_;  // ascending, disjoint
  std::map<std::uint32_t, Horizon> horizons_;
  std::uint32_t nextHorizon_ = 1;
  bool standby_ = false;  // which proof horizons_ hold
  struct Counted {
    std::int64_t id;
    double createdAt;  // seconds since the epoch, the database's clock
  };
  std::deque<Counted> recent_;  // counted last, oldest first, at most recentIds
  double highWaterCreatedAt_ = 0;
};

// "{1,2,3}": a bigint[] parameter in text form.
std::string bigintArrayLiteral(std::vector<std::int64_t>::const_iterator begin,
                               std::vector<std::int64_t>::const_iterator end);

}  // namespace idem::exporter

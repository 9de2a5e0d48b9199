#include "collection_loop.hpp"

#include <algorithm>
#include <pqxx/nontransaction>
#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "incremental_reader.hpp"
#include "log.hpp"

namespace idem::exporter {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{1'000};
constexpr std::chrono::milliseconds kMaxBackoff{30'000};
// How long counting waits for a standby that lacks rows already counted to replay them, before
// the counts start afresh; below the 5 minutes after which a collection that never succeeds pages.
constexpr std::chrono::minutes kStandbyCatchUp{2};

// The exporter only reads: the session says so, as a guard against any future mistake. Its
// statements are short index walks: JIT compilation (triggered by the planner's cost estimates of
// per-row subplans) and parallel workers would only add cost to the database it watches.
constexpr const char* kSessionSetup =
    "SET default_transaction_read_only = on; SET jit = off; SET max_parallel_workers_per_gather = "
    "0";

// What the server is, and on a standby how far its replay lags: 0 once it has replayed all it
// received (an idle primary sends nothing, and its last commit ages without any lag), else the
// age of the last commit it replayed (NULL when it has replayed none since it started). Then which
// server it is: its WAL timeline (a primary's from its current WAL file's name; a standby's from
// the WAL receiver when this login may see it, else from its last restartpoint) and when its
// postmaster started. Asked at connect and at each collection: a promotion, a failover behind
// the same address, a restart.
constexpr const char* kServerRole = R"SQL(
SELECT pg_catalog.pg_is_in_recovery(),
       CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN NULL
            WHEN pg_catalog.pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_catalog.pg_last_wal_replay_lsn()
            THEN 0
            ELSE greatest(0, extract(epoch FROM now() - pg_catalog.pg_last_xact_replay_timestamp()))::float8
       END,
       CASE WHEN NOT pg_catalog.pg_is_in_recovery()
            THEN ('x' || substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::int8
            ELSE coalesce((SELECT received_tli FROM pg_catalog.pg_stat_wal_receiver),
                          (SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()))::int8
       END,
       pg_catalog.pg_postmaster_start_time()::text
)SQL";

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return primaryMessage(e.what());
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

CollectionLoop::CollectionLoop(ConnectionSettings settings, CollectorSet& collectors,
                               std::chrono::milliseconds interval)
    : settings_(std::move(settings)),
      set_(collectors),
      interval_(interval),
      nextDue_(collectors.collectors().size(), std::chrono::steady_clock::time_point{}) {}

CollectionLoop::~CollectionLoop() {
  stop();
}

void CollectionLoop::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void CollectionLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool CollectionLoop::waitFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, d, [this] { return stopping_; });
}

bool CollectionLoop::connect() {
  try {
    auto c = idem::connect(settings_);
    // Every statement runs in a transaction opened through idem/bounded_transaction.hpp, which
    // carries the statement timeout (SET LOCAL; StatementTimeoutScope in run()), so nothing is
    // bounded through the session. Behind a pooler (PgBouncer in transaction mode) a session
    // setting would stay on the server connection for its next client, so none is made there; a
    // session of our own also gets the read-only and planner settings, which no one else sees.
    if (idem::sessionIsShared(*c)) {
      logInfo("the database connection goes through a pooler: no session settings");
    } else {
      pqxx::nontransaction tx(*c);
      tx.exec(kSessionSetup);
      tx.commit();
    }
    connection_ = std::move(c);
    const bool standby = readServerRole();
    const std::string role = standby
                                 ? " (a hot standby: counting what it has replayed; replay lag in "
                                   "idempotency_exporter_replay_lag_seconds)"
                                 : "";
    if (connectFailures_ > 0) {
      logInfo("connected to the database " + settings_.redacted() + role + " again after " +
              std::to_string(connectFailures_) + " failed attempt(s)");
    } else {
      logInfo("connected to the database " + settings_.redacted() + role);
    }
    connectFailures_ = 0;
    return true;
  } catch (...) {
    connection_.reset();
    const auto backoff =
        std::min(kMaxBackoff, kFirstBackoff * (1 << std::min(connectFailures_, 5)));
    ++connectFailures_;
    set_.health().recordError("connect");
    logError(describe(std::current_exception()) +
             "; serving idempotency_exporter_db_up 0, retrying in " + formatDuration(backoff));
    set_.health().setDatabaseUp(false);
    ++collections_;
    waitFor(backoff);
    return false;
  }
}

bool CollectionLoop::readServerRole() {
  pqxx::row row;
  {
    idem::ReadTransaction tx(*connection_);
    row = tx.exec1(kServerRole);
    tx.commit();
  }
  const bool standby = row[0].as<bool>();
  if (standby_ && !standby) {
    logInfo("the standby was promoted: the database is a primary now; counting goes on");
  }
  standby_ = standby;
  set_.health().setStandby(standby,
                           row[1].is_null() ? std::nullopt : std::optional(row[1].as<double>()));
  const ServerIdentity seen{row[2].as<std::int64_t>(0), row[3].as<std::string>()};
  set_.health().setTimeline(seen.timeline);
  if (server_ && *server_ != seen) {
    serverChange_ =
        ServerChange{server_->timeline != seen.timeline
                         ? "the database is on timeline " + std::to_string(seen.timeline) +
                               " (was " + std::to_string(server_->timeline) + ")"
                         : "the database server restarted, or another one answers at this address",
                     std::chrono::steady_clock::now(), false};
  }
  server_ = seen;
  if (serverChange_) checkCountedRows(standby);
  return standby;
}

void CollectionLoop::checkCountedRows(bool standby) {
  ServerChange& change = *serverChange_;
  std::size_t missing = 0;
  for (const auto& c : set_.collectors()) {
    for (IncrementalReader* r : c->readers()) missing += r->serverChanged(*connection_);
  }
  if (missing == 0) {
    logInfo(change.what + "; every row counted last is on it: counting goes on");
    serverChange_.reset();
    return;
  }
  // A standby may only be behind the server read before (another replica behind a read-only
  // address): it replays those rows soon. Counting waits for it, no longer than kStandbyCatchUp.
  if (standby && std::chrono::steady_clock::now() - change.since < kStandbyCatchUp) {
    if (!change.waitLogged) {
      logInfo(change.what + " and lacks " + std::to_string(missing) +
              " row(s) already counted: a standby behind the one read before; counting waits "
              "up to " +
              formatDuration(kStandbyCatchUp) + " for it to replay them");
      change.waitLogged = true;
    }
    return;
  }
  logWarn(change.what + " and lacks " + std::to_string(missing) +
          " row(s) already counted: writes it acknowledged were lost (a failover to an "
          "asynchronous standby, or a crash with synchronous_commit off). The counts start "
          "afresh from this server (idempotency_exporter_count_restarts_total)");
  set_.restartCounts();
  std::fill(nextDue_.begin(), nextDue_.end(), std::chrono::steady_clock::time_point{});
  set_.health().recordCountRestart();
  serverChange_.reset();
}

// A failed step: counted and logged under `stage`; when it ended the session, the connection is
// dropped (reconnect at once). Returns whether the database is still reached.
bool CollectionLoop::recordFailure(const std::string& stage, const std::exception_ptr& error) {
  set_.health().recordError(stage);
  logWarn(stage + ": " + describe(error));
  const auto databaseError = asDatabaseError(error, stage.c_str());
  if ((databaseError && databaseError->endsSession()) || !connection_->is_open()) {
    logError("lost the database connection; reconnecting");
    connection_.reset();
    return false;
  }
  return true;
}

void CollectionLoop::collectOnce(std::chrono::steady_clock::time_point started) {
  bool succeeded = true;
  bool reached = true;
  try {
    readServerRole();
  } catch (...) {
    succeeded = false;
    reached = recordFailure("connect", std::current_exception());
  }
  // Waiting for a standby to replay rows already counted: no collector reads it meanwhile (its
  // figures stay those of the last collection), and the collection is not a success.
  if (serverChange_ && connection_) succeeded = false;
  const auto& collectors = set_.collectors();
  for (std::size_t i = 0; i < collectors.size() && connection_ && !serverChange_; ++i) {
    if (started < nextDue_[i]) continue;
    Collector& c = *collectors[i];
    if (&c == &set_.health()) continue;  // it reads nothing; the loop feeds it
    const std::string name(c.name());
    const auto updateStarted = std::chrono::steady_clock::now();
    try {
      c.update(*connection_);
      if (c.interval().count() > 0) nextDue_[i] = started + c.interval();
      set_.health().recordCollector(name, std::chrono::steady_clock::now() - updateStarted, true);
    } catch (...) {
      set_.health().recordCollector(name, std::chrono::steady_clock::now() - updateStarted, false);
      succeeded = false;
      reached = recordFailure(name, std::current_exception()) && reached;
    }
  }
  set_.health().recordCollection(std::chrono::steady_clock::now() - started, reached, succeeded);
  ++collections_;
}

void CollectionLoop::run() {
  const StatementTimeoutScope timeout(settings_.statementTimeout);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    if (!connection_ && !connect()) continue;
    const auto started = std::chrono::steady_clock::now();
    collectOnce(started);
    const auto next = started + interval_;
    const auto now = std::chrono::steady_clock::now();
    if (!connection_) continue;  // reconnect at once; connect() backs off if that fails
    // Rounded up, never down: waking a fraction early would find a collector due at `next` not
    // due yet, and skip it for a whole interval.
    if (!waitFor(std::chrono::ceil<std::chrono::milliseconds>(std::max(now, next) - now))) {
      return;
    }
  }
}

}  // namespace idem::exporter

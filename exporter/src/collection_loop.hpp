// The background collection: one thread owns the exporter's one database connection and runs the
// collectors that are due, every --collect-interval. When the database is unreachable it keeps
// trying with exponential backoff (1s doubling to 30s) while /metrics goes on serving the last
// figures with idempotency_exporter_db_up 0; collectors keep their state across reconnects, so
// nothing is lost or counted twice. On a hot standby it also follows the replay lag at each
// collection, and notices a promotion; each collector's update is timed for self-health. A server
// that changed behind the connection (a failover, a restart) has the rows counted last looked up,
// and the counts start afresh when it lacks any (incremental_reader.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <thread>

#include "collectors/collector_list.hpp"
#include "idem/connection_settings.hpp"

namespace idem::exporter {

class CollectionLoop {
 public:
  CollectionLoop(ConnectionSettings settings, CollectorSet& collectors,
                 std::chrono::milliseconds interval);
  ~CollectionLoop();
  CollectionLoop(const CollectionLoop&) = delete;
  CollectionLoop& operator=(const CollectionLoop&) = delete;

  void start();
  void stop();

  // Collections finished so far (successful or not), for tests that wait for one.
  std::uint64_t collections() const { return collections_.load(); }

 private:
  void run();
  bool connect();
  // Which server answers: another one, or the same on a new timeline or after a restart, may
  // lack rows the old one had.
  struct ServerIdentity {
    std::int64_t timeline = 0;
    std::string startedAt;  // pg_postmaster_start_time()
    bool operator==(const ServerIdentity&) const = default;
  };

  // Asks whether the server is a standby (and its replay lag) and which server it is, and tells
  // self-health; logs a promotion, checks the counted rows on a server that changed. Throws on
  // database errors.
  bool readServerRole();
  // A change of server whose counted rows are still to be found on the new one.
  struct ServerChange {
    std::string what;  // for the log
    std::chrono::steady_clock::time_point since;
    bool waitLogged = false;
  };
  // The readers look up the rows they counted last. All there: counting goes on. Any missing: on
  // a primary the counts start afresh; a standby is given kStandbyCatchUp to replay them first,
  // while no collector runs. Throws on database errors (asked again at the next collection).
  void checkCountedRows(bool standby);
  bool recordFailure(const std::string& stage, const std::exception_ptr& error);
  // One pass over the collectors that are due at `started`, the time this collection was
  // scheduled from: a collector whose interval equals the collection interval runs every time.
  void collectOnce(std::chrono::steady_clock::time_point started);
  bool waitFor(std::chrono::milliseconds d);  // false when stopping

  ConnectionSettings settings_;
  CollectorSet& set_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<pqxx::connection> connection_;  // collection thread only
  std::vector<std::chrono::steady_clock::time_point> nextDue_;
  int connectFailures_ = 0;
  bool standby_ = false;                      // the connected server was a standby at the last look
  std::optional<ServerIdentity> server_;      // the last server seen, across reconnects
  std::optional<ServerChange> serverChange_;  // not yet checked, or a standby awaited

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<std::uint64_t> collections_{0};
};

}  // namespace idem::exporter

// A throwaway PgBouncer (Debian's pgbouncer) in front of the test cluster, as production runs it:
// default settings but pool_mode = transaction, so a client's transactions land on whichever
// server connection is free and a session setting stays on the server connection for the next
// client. A small pool makes that sharing certain. Run as `postgres` when the tests run as root
// (pgbouncer refuses root), with a private ini in a temporary folder, on a free TCP port only.
#pragma once

#include <QString>
#include <QTemporaryDir>
#include <memory>
#include <string>
#include <vector>

namespace idem::test {

class PgBouncer {
 public:
  // In front of the server that serverDsn names (its host and port; any database on it). auth_type
  // trust, but pgbouncer still lets in only the users listed: pass every login the test uses.
  explicit PgBouncer(const std::string& serverDsn,
                     const std::vector<std::string>& users = {"postgres"}, int poolSize = 2);
  ~PgBouncer();
  PgBouncer(const PgBouncer&) = delete;
  PgBouncer& operator=(const PgBouncer&) = delete;

  int port() const { return port_; }
  // `dsn` (a key=value DSN of the same server) with its host and port turned to pgbouncer's.
  std::string through(const std::string& dsn) const;
  QString log() const;

 private:
  void stop();

  std::unique_ptr<QTemporaryDir> dir_;
  int port_ = 0;
};

}  // namespace idem::test

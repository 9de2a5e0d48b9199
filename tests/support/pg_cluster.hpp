// A throwaway PostgreSQL cluster for tests: initdb in a temporary folder, a free port, a private
// socket folder; run as the `postgres` user when the tests run as root (CI does).
#pragma once

#include <QString>
#include <QTemporaryDir>
#include <memory>

namespace idem::test {

class PgCluster {
 public:
  // Creates and starts the cluster; throws std::runtime_error with the server's log on failure.
  PgCluster();
  ~PgCluster();
  // A streaming hot standby of `primary`, started and consistent: pg_basebackup -R -X stream (as
  // the owner, over TCP), its own folder, port and socket folder, the same max_* settings.
  static std::unique_ptr<PgCluster> standbyOf(const PgCluster& primary);
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  void start();
  void stop();   // fast shutdown; connections are cut
  void crash();  // immediate shutdown: no checkpoint, crash recovery at the next start
  bool isRunning() const { return running_; }

  int port() const { return port_; }
  QString socketDir() const;
  // A DSN for dbname as the superuser.
  QString dsn(const QString& dbname = QStringLiteral("postgres")) const;

  // A standby's: waits until it has replayed everything `primary` has written so far; throws
  // std::runtime_error at the deadline.
  void waitForCatchUp(const PgCluster& primary, int timeoutMs = 30000) const;
  // A standby's: pg_ctl promote, waiting until it accepts writes.
  void promote();
  // A standby's: streams from `primary` from now on (primary_conninfo, reloaded), following it
  // onto its timeline, as Patroni points the replicas at a new leader.
  void follow(const PgCluster& primary);

 private:
  struct StandbyOf {
    const PgCluster& primary;
  };
  explicit PgCluster(StandbyOf standby);
  void makeFolder();
  void stopWith(const QString& mode);
  QString runAsOwner(const QStringList& command, int timeoutMs) const;
  void startWatchdog();
  bool watchdogStarted_ = false;
  std::unique_ptr<QTemporaryDir> dir_;
  int port_ = 0;
  bool running_ = false;
};

// A free TCP port on 127.0.0.1 (bound then released).
int freePort();

// The folder with initdb, pg_ctl and postgres.
QString postgresBinDir();

}  // namespace idem::test

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
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  void start();
  void stop();  // fast shutdown; connections are cut
  bool isRunning() const { return running_; }

  int port() const { return port_; }
  QString socketDir() const;
  // A DSN for dbname as the superuser.
  QString dsn(const QString& dbname = QStringLiteral("postgres")) const;

 private:
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

#include "pg_cluster.hpp"

#include <unistd.h>

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTcpServer>
#include <QThread>
#include <pqxx/pqxx>
#include <stdexcept>

namespace idem::test {

int freePort() {
  QTcpServer server;
  if (!server.listen(QHostAddress::LocalHost, 0)) throw std::runtime_error("no free TCP port");
  return server.serverPort();
}

QString postgresBinDir() {
  if (const QByteArray env = qgetenv("PG_BIN"); !env.isEmpty()) return QString::fromLocal8Bit(env);
  QDir root(QStringLiteral("/usr/lib/postgresql"));
  QStringList versions = root.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
  std::sort(versions.begin(), versions.end(),
            [](const QString& a, const QString& b) { return a.toInt() < b.toInt(); });
  if (versions.isEmpty())
    throw std::runtime_error("no PostgreSQL server under /usr/lib/postgresql");
  return root.filePath(versions.last() + QStringLiteral("/bin"));
}

void PgCluster::makeFolder() {
  // /tmp, not the build folder: the postgres user may not be able to enter the checkout's parents.
  dir_ =
      std::make_unique<QTemporaryDir>(QDir::tempPath() + QStringLiteral("/idemwatch-test-XXXXXX"));
  if (!dir_->isValid()) throw std::runtime_error("cannot create a temporary folder for PostgreSQL");
  QFile::setPermissions(dir_->path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                          QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                          QFileDevice::WriteOther | QFileDevice::ExeOther);
  QDir(dir_->path()).mkdir(QStringLiteral("sock"));
  QFile::setPermissions(socketDir(), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                         QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                         QFileDevice::WriteOther | QFileDevice::ExeOther);
}

PgCluster::PgCluster() {
  makeFolder();
  runAsOwner({postgresBinDir() + QStringLiteral("/initdb"), QStringLiteral("-D"),
              dir_->path() + QStringLiteral("/data"), QStringLiteral("-U"),
              QStringLiteral("postgres"), QStringLiteral("--auth=trust"),
              QStringLiteral("--encoding=UTF8"), QStringLiteral("--locale=C.UTF-8")},
             120000);
  port_ = freePort();
  start();
}

PgCluster::PgCluster(StandbyOf standby) {
  makeFolder();
  // -R writes primary_conninfo and standby.signal; -X stream copies the WAL the backup needs.
  runAsOwner(
      {postgresBinDir() + QStringLiteral("/pg_basebackup"), QStringLiteral("-h"),
       QStringLiteral("127.0.0.1"), QStringLiteral("-p"), QString::number(standby.primary.port()),
       QStringLiteral("-U"), QStringLiteral("postgres"), QStringLiteral("-D"),
       dir_->path() + QStringLiteral("/data"), QStringLiteral("-R"), QStringLiteral("-X"),
       QStringLiteral("stream"), QStringLiteral("-c"), QStringLiteral("fast")},
      120000);
  port_ = freePort();
  start();  // pg_ctl -w returns once the standby is consistent and accepts connections
}

std::unique_ptr<PgCluster> PgCluster::standbyOf(const PgCluster& primary) {
  return std::unique_ptr<PgCluster>(new PgCluster(StandbyOf{primary}));
}

void PgCluster::waitForCatchUp(const PgCluster& primary, int timeoutMs) const {
  std::string target;
  {
    pqxx::connection c(primary.dsn().toStdString());
    pqxx::nontransaction tx(c);
    target = tx.exec1("SELECT pg_catalog.pg_current_wal_lsn()::text")[0].c_str();
  }
  pqxx::connection c(dsn().toStdString());
  QElapsedTimer timer;
  timer.start();
  for (;;) {
    pqxx::nontransaction tx(c);
    if (tx.exec_params1("SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::pg_lsn", target)[0]
            .as<bool>())
      return;
    if (timer.elapsed() > timeoutMs)
      throw std::runtime_error("the standby did not replay up to " + target + " in time");
    QThread::msleep(20);
  }
}

void PgCluster::promote() {
  runAsOwner({postgresBinDir() + QStringLiteral("/pg_ctl"), QStringLiteral("-D"),
              dir_->path() + QStringLiteral("/data"), QStringLiteral("-w"), QStringLiteral("-t"),
              QStringLiteral("60"), QStringLiteral("promote")},
             90000);
}

void PgCluster::follow(const PgCluster& primary) {
  pqxx::connection c(dsn().toStdString());
  pqxx::nontransaction tx(c);
  tx.exec("ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=" +
          std::to_string(primary.port()) + " user=postgres'");
  tx.exec("SELECT pg_catalog.pg_reload_conf()");
}

PgCluster::~PgCluster() {
  try {
    stop();
  } catch (...) {  // a destructor must not throw; the folder goes away regardless
  }
}

QString PgCluster::socketDir() const {
  return dir_->path() + QStringLiteral("/sock");
}

QString PgCluster::dsn(const QString& dbname) const {
  return QStringLiteral("host=%1 port=%2 user=postgres dbname=%3")
      .arg(socketDir())
      .arg(port_)
      .arg(dbname);
}

QString PgCluster::runAsOwner(const QStringList& command, int timeoutMs) const {
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  QStringList argv = command;
  if (geteuid() == 0) {
    argv =
        QStringList{QStringLiteral("-u"), QStringLiteral("postgres"), QStringLiteral("--")} + argv;
    p.start(QStringLiteral("runuser"), argv);
  } else {
    p.start(argv.takeFirst(), argv);
  }
  if (!p.waitForFinished(timeoutMs) || p.exitStatus() != QProcess::NormalExit ||
      p.exitCode() != 0) {
    const QString out = QString::fromLocal8Bit(p.readAll());
    throw std::runtime_error(
        ("PostgreSQL command failed: " + command.join(' ') + "\n" + out).toStdString());
  }
  return QString::fromLocal8Bit(p.readAll());
}

void PgCluster::start() {
  if (running_) return;
  const QString opts =
      QStringLiteral(
          "-p %1 -k %2 -c listen_addresses=127.0.0.1 -c max_connections=200 "
          "-c fsync=off -c shared_preload_libraries=pg_stat_statements -c hot_standby=on")
          .arg(port_)
          .arg(socketDir());
  try {
    runAsOwner(
        {postgresBinDir() + QStringLiteral("/pg_ctl"), QStringLiteral("-D"),
         dir_->path() + QStringLiteral("/data"), QStringLiteral("-l"),
         dir_->path() + QStringLiteral("/postgres.log"), QStringLiteral("-w"), QStringLiteral("-t"),
         QStringLiteral("60"), QStringLiteral("-o"), opts, QStringLiteral("start")},
        90000);
  } catch (const std::exception& e) {
    QFile log(dir_->path() + QStringLiteral("/postgres.log"));
    log.open(QIODevice::ReadOnly);
    throw std::runtime_error(std::string(e.what()) + "\n" + log.readAll().toStdString());
  }
  running_ = true;
  startWatchdog();
}

// A test killed by a timeout or a crash cannot run its destructors. A detached shell outlives it,
// notices, and stops the cluster and removes its folder, so no server is left running.
void PgCluster::startWatchdog() {
  if (watchdogStarted_) return;
  const QString runAs = geteuid() == 0 ? QStringLiteral("runuser -u postgres -- ") : QString();
  const QString script =
      QStringLiteral(
          "while kill -0 %1 2>/dev/null; do sleep 1; done; "
          "%2'%3/pg_ctl' -D '%4/data' -m immediate stop >/dev/null 2>&1; rm -rf '%4'")
          .arg(QCoreApplication::applicationPid())
          .arg(runAs, postgresBinDir(), dir_->path());
  watchdogStarted_ =
      QProcess::startDetached(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), script});
}

void PgCluster::stop() {
  stopWith(QStringLiteral("fast"));
}

void PgCluster::crash() {
  stopWith(QStringLiteral("immediate"));
}

void PgCluster::stopWith(const QString& mode) {
  if (!running_) return;
  runAsOwner(
      {postgresBinDir() + QStringLiteral("/pg_ctl"), QStringLiteral("-D"),
       dir_->path() + QStringLiteral("/data"), QStringLiteral("-m"), mode, QStringLiteral("-w"),
       QStringLiteral("-t"), QStringLiteral("60"), QStringLiteral("stop")},
      90000);
  running_ = false;
}

}  // namespace idem::test

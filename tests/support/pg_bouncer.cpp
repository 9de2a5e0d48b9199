#include "pg_bouncer.hpp"

#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTcpSocket>
#include <QThread>
#include <chrono>
#include <map>
#include <stdexcept>

#include "pg_cluster.hpp"

namespace idem::test {
namespace {

constexpr const char* kBinary = "/usr/sbin/pgbouncer";

// key -> value of a key=value DSN or URI, as libpq reads it.
std::map<std::string, std::string> parseDsn(const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    const std::string why = error != nullptr ? error : "out of memory";
    if (error != nullptr) PQfreemem(error);
    throw std::runtime_error("pgbouncer: cannot parse the DSN " + dsn + ": " + why);
  }
  std::map<std::string, std::string> out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && *o->val != '\0') out[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return out;
}

void writeFile(const QString& path, const std::string& text) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())) {
    throw std::runtime_error("pgbouncer: cannot write " + path.toStdString());
  }
  f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadOther);
}

bool accepts(int port) {
  QTcpSocket socket;
  socket.connectToHost(QStringLiteral("127.0.0.1"), static_cast<quint16>(port));
  return socket.waitForConnected(200);
}

bool alive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

}  // namespace

PgBouncer::PgBouncer(const std::string& serverDsn, const std::vector<std::string>& users,
                     int poolSize) {
  if (!QFile::exists(QString::fromLatin1(kBinary))) {
    throw std::runtime_error("pgbouncer (Debian package pgbouncer) is needed by this test");
  }
  // /tmp, not the build folder: the postgres user may not be able to enter the checkout's parents.
  dir_ = std::make_unique<QTemporaryDir>(QDir::tempPath() +
                                         QStringLiteral("/idemwatch-pgbouncer-XXXXXX"));
  if (!dir_->isValid()) throw std::runtime_error("pgbouncer: cannot create a temporary folder");
  QFile::setPermissions(dir_->path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                          QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                          QFileDevice::WriteOther | QFileDevice::ExeOther);
  const auto server = parseDsn(serverDsn);
  const std::string host = server.count("host") ? server.at("host") : "127.0.0.1";
  const std::string serverPort = server.count("port") ? server.at("port") : "5432";
  port_ = freePort();

  std::string userlist;
  for (const std::string& user : users) userlist += "\"" + user + "\" \"\"\n";
  const std::string folder = dir_->path().toStdString();
  writeFile(dir_->filePath(QStringLiteral("userlist.txt")), userlist);
  // Defaults but the pool mode, the pool size, and what a private test instance needs. No
  // ignore_startup_parameters: a client sending `options` must be refused, as in production.
  writeFile(dir_->filePath(QStringLiteral("pgbouncer.ini")),
            "[databases]\n* = host=" + host + " port=" + serverPort +
                "\n\n[pgbouncer]\npool_mode = transaction\ndefault_pool_size = " +
                std::to_string(poolSize) +
                "\nlisten_addr = 127.0.0.1\nlisten_port = " + std::to_string(port_) +
                "\nunix_socket_dir =\nauth_type = trust\nauth_file = " + folder +
                "/userlist.txt\npidfile = " + folder + "/pgbouncer.pid\nlogfile = " + folder +
                "/pgbouncer.log\n");

  QStringList argv{QString::fromLatin1(kBinary), QStringLiteral("-d"),
                   dir_->filePath(QStringLiteral("pgbouncer.ini"))};
  if (geteuid() == 0) {
    argv = QStringList{QStringLiteral("runuser"), QStringLiteral("-u"), QStringLiteral("postgres"),
                       QStringLiteral("--")} +
           argv;
  }
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(argv.takeFirst(), argv);
  if (!p.waitForFinished(30000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
    throw std::runtime_error("pgbouncer did not start: " + p.readAll().toStdString() +
                             log().toStdString());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepts(port_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("pgbouncer does not listen on port " + std::to_string(port_) + ": " +
                               log().toStdString());
    }
    QThread::msleep(50);
  }
}

PgBouncer::~PgBouncer() {
  stop();
}

void PgBouncer::stop() {
  QFile pidFile(dir_->filePath(QStringLiteral("pgbouncer.pid")));
  if (!pidFile.open(QIODevice::ReadOnly)) return;
  const pid_t pid = static_cast<pid_t>(pidFile.readAll().trimmed().toInt());
  if (!alive(pid)) return;
  ::kill(pid, SIGTERM);  // immediate shutdown: clients are cut, as a test wants
  for (int i = 0; i < 100 && alive(pid); ++i) QThread::msleep(50);
  if (alive(pid)) ::kill(pid, SIGKILL);
}

std::string PgBouncer::through(const std::string& dsn) const {
  std::string out = "host=127.0.0.1 port=" + std::to_string(port_);
  for (const auto& [key, value] : parseDsn(dsn)) {
    if (key == "host" || key == "port" || key == "hostaddr") continue;
    std::string quoted;
    for (char ch : value) {
      if (ch == '\'' || ch == '\\') quoted += '\\';
      quoted += ch;
    }
    out += " " + key + "='" + quoted + "'";
  }
  return out;
}

QString PgBouncer::log() const {
  QFile f(dir_->filePath(QStringLiteral("pgbouncer.log")));
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

}  // namespace idem::test

// How a failed connection attempt is classified (idem::connect): libpq reports it as text only,
// and the programs must tell "a person must supply a password" from "the server is not there",
// because the first is never cured by retrying (the admin app stops its reconnect loop for it).
#include <QtTest>
#include <fstream>
#include <sstream>

#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "pg_cluster.hpp"
#include "test_database.hpp"

using namespace idem;
using idem::test::TestDatabase;

class TestConnectErrors : public QObject {
  Q_OBJECT

  std::unique_ptr<TestDatabase> db_;
  std::string socketDir_;
  std::string port_;

  static DatabaseError connectFailure(const std::string& dsn) {
    ConnectionSettings settings;
    settings.dsn = dsn;
    settings.source = "test";
    try {
      idem::connect(settings);
    } catch (const DatabaseError& e) {
      return e;
    }
    throw std::runtime_error("connected to " + dsn + " although it should fail");
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<TestDatabase>("connect_errors", false);
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    socketDir_ =
        tx.exec("SELECT setting FROM pg_settings WHERE name = 'unix_socket_directories'")[0][0]
            .as<std::string>();
    socketDir_ = socketDir_.substr(0, socketDir_.find(','));
    port_ = tx.exec("SHOW port")[0][0].as<std::string>();
    // A role that must give a password over the socket: prepend its own rule to pg_hba.conf
    // (rules match in order) and reload. Other roles keep the cluster's trust rule.
    const auto hbaFile = tx.exec("SHOW hba_file")[0][0].as<std::string>();
    tx.exec("DROP ROLE IF EXISTS idem_pw_test");
    tx.exec("CREATE ROLE idem_pw_test LOGIN PASSWORD 'right-password'");
    std::ifstream in(hbaFile);
    std::stringstream old;
    old << in.rdbuf();
    if (old.str().find("idem_pw_test") == std::string::npos) {
      std::ofstream out(hbaFile, std::ios::trunc);
      if (!out) QSKIP("pg_hba.conf of the test cluster is not writable by this user");
      out << "local all idem_pw_test scram-sha-256\n" << old.str();
    }
    tx.exec("SELECT pg_reload_conf()");
    QTest::qWait(300);
  }

  void missingPasswordNeedsPassword() {
    const DatabaseError e =
        connectFailure("host=" + socketDir_ + " port=" + port_ +
                       " user=idem_pw_test dbname=" + db_->name() + " passfile=/nonexistent");
    QCOMPARE(e.kind(), DatabaseErrorKind::NeedsPassword);
    QVERIFY(e.endsSession());
    QVERIFY2(std::string(e.what()).find("cannot connect to the database") != std::string::npos,
             e.what());
  }

  void wrongPasswordNeedsPassword() {
    const DatabaseError e =
        connectFailure("host=" + socketDir_ + " port=" + port_ +
                       " user=idem_pw_test dbname=" + db_->name() + " password=wrong-password");
    QCOMPARE(e.kind(), DatabaseErrorKind::NeedsPassword);
    QCOMPARE(e.sqlstate(), std::string("28P01"));
  }

  void rightPasswordConnects() {
    ConnectionSettings settings;
    settings.dsn = "host=" + socketDir_ + " port=" + port_ +
                   " user=idem_pw_test dbname=" + db_->name() + " password=right-password";
    QVERIFY(idem::connect(settings)->is_open());
  }

  void noServerIsConnectionLostNotPassword() {
    const int port = idem::test::freePort();
    const DatabaseError e = connectFailure("host=127.0.0.1 port=" + std::to_string(port) +
                                           " user=postgres connect_timeout=2");
    QCOMPARE(e.kind(), DatabaseErrorKind::ConnectionLost);
    QCOMPARE(e.sqlstate(), std::string("08001"));
  }

  void unknownRoleIsNotAPasswordProblem() {
    const DatabaseError e = connectFailure("host=" + socketDir_ + " port=" + port_ +
                                           " user=idem_no_such_role dbname=" + db_->name());
    QVERIFY(e.kind() != DatabaseErrorKind::NeedsPassword);
  }

  void cleanupTestCase() {
    if (!db_) return;
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("DROP ROLE IF EXISTS idem_pw_test");
  }
};

QTEST_GUILESS_MAIN(TestConnectErrors)
#include "tst_connect_errors.moc"

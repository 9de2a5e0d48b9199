// idemctl as a user meets it: exit codes, one-line errors, and the settle runbook path.
#include <QtTest>

#include <sstream>

#include "idem/protocol_client.hpp"
#include "idemctl.hpp"
#include "test_database.hpp"

using namespace idem;

class TestIdemctl : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::atomic<bool> stop_{false};
  std::string out_, err_;

  int idemctl(std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = ctl::run(args, {out, err, false}, stop_);
    out_ = out.str();
    err_ = err.str();
    return code;
  }
  bool errSays(const char* text) { return err_.find(text) != std::string::npos; }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_idemctl", false); }

  void usageErrorsExitTwoWithOneLine() {
    QCOMPARE(idemctl({}), 2);
    QCOMPARE(idemctl({"frobnicate"}), 2);
    QVERIFY(errSays("unknown command 'frobnicate'"));
    QCOMPARE(idemctl({"simulate", "--agents=0"}), 2);
    QCOMPARE(err_, std::string("idemctl simulate: --agents must be between 1 and 256, got 0\n"));
    QCOMPARE(idemctl({"simulate", "--response-loss-rate=2"}), 2);
    QCOMPARE(idemctl({"simulate", "--duration=forever"}), 2);
    QVERIFY(errSays("--duration must be a duration"));
    QCOMPARE(idemctl({"settle", "k1", "--to", "DONE", "--reason", "x"}), 2);
    QVERIFY(errSays("--to must be SUCCESS or FAILED, got 'DONE'"));
    QCOMPARE(idemctl({"settle", "k1", "--to", "FAILED"}), 2);
    QVERIFY(errSays("--reason is required"));
    QCOMPARE(idemctl({"settle", "--to", "FAILED", "--reason", "x"}), 2);
    QCOMPARE(idemctl({"purge"}), 2);
    QCOMPARE(idemctl({"migrate", "--no-such-flag"}), 2);
    QCOMPARE(std::count(err_.begin(), err_.end(), '\n'), 1L);
  }

  void unreachableDatabaseExitsOne() {
    QCOMPARE(idemctl({"migrate", "--db.dsn", "host=/nonexistent port=1"}), 1);
    QVERIFY(errSays("idemctl migrate: cannot connect to the database host=/nonexistent port=1 (from --db.dsn)"));
    QCOMPARE(std::count(err_.begin(), err_.end(), '\n'), 1L);
    QCOMPARE(idemctl({"simulate", "--db.dsn", "host=/nonexistent port=1", "--requests", "5"}), 1);
  }

  void migrateThenSimulateThenSettle() {
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(out_.find("applied 001_tables.sql") != std::string::npos);
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(out_.find("schema up to date") != std::string::npos);

    QCOMPARE(idemctl({"simulate", "--db.dsn", db_->dsn(), "--requests", "300", "--seed", "3",
                      "--run-id", "ctl", "--response-loss-rate", "0.3", "--callback-resolves-rate", "0"}), 0);
    QVERIFY2(out_.find("operations 300") != std::string::npos, out_.c_str());
    QVERIFY(out_.find("in_progress") != std::string::npos);

    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const auto unknown = tx.exec("SELECT r.idempotency_key, r.version, EXISTS (SELECT 1 FROM idem.fund_flows f WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id AND f.kind = 'DEBIT') "
                                 "FROM idem.records r WHERE status = 'UNKNOWN' AND biz_type = 'payment' ORDER BY 1 LIMIT 2");
    QCOMPARE(unknown.size(), 2UL);
    const std::string key = unknown[0][0].c_str();
    const std::string version = unknown[0][1].c_str();
    QVERIFY(unknown[0][2].as<bool>());  // a lost response: the money did move

    // FAILED against a recorded DEBIT is refused without the override.
    QCOMPARE(idemctl({"settle", key, "--to", "FAILED", "--reason", "no charge?", "--db.dsn", db_->dsn()}), 3);
    QVERIFY(errSays("DEBIT"));
    // A stale version is refused and says what it is now.
    QCOMPARE(idemctl({"settle", key, "--to", "SUCCESS", "--reason", "x", "--expect-version", "1", "--db.dsn", db_->dsn()}), 3);
    QVERIFY(errSays("changed since version 1"));
    QCOMPARE(idemctl({"settle", key, "--to", "SUCCESS", "--reason", "gateway statement shows the charge",
                      "--evidence", R"({"gateway_ref": "gw-1"})", "--expect-version", version, "--db.dsn", db_->dsn()}), 0);
    QVERIFY(out_.find("settled " + key + " to SUCCESS") != std::string::npos);
    QCOMPARE(std::string(tx.exec_params1("SELECT status FROM idem.records WHERE idempotency_key = $1", key)[0].c_str()), std::string("SUCCESS"));
    // Settled records cannot be settled again.
    QCOMPARE(idemctl({"settle", key, "--to", "FAILED", "--reason", "x", "--override-debit-warning", "--db.dsn", db_->dsn()}), 3);
    QVERIFY(errSays("only PROCESSING or UNKNOWN"));
    QCOMPARE(idemctl({"settle", "no-such-key", "--to", "FAILED", "--reason", "x", "--db.dsn", db_->dsn()}), 3);
    QCOMPARE(idemctl({"settle", key, "--to", "SUCCESS", "--reason", "x", "--evidence", "{broken", "--db.dsn", db_->dsn()}), 2);
  }

  void maintenanceCommands() {
    QCOMPARE(idemctl({"expire-leases", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(out_.find("past their lease") != std::string::npos);
    QCOMPARE(idemctl({"purge", "--older-than", "30d", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(out_.find("purged rows older than 30d") != std::string::npos);
    QCOMPARE(idemctl({"version"}), 0);
    QVERIFY(out_.starts_with("idemctl "));
  }
};

QTEST_GUILESS_MAIN(TestIdemctl)
#include "tst_idemctl.moc"

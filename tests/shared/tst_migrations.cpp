// Migrations: a fresh database gets the whole schema, a second run changes nothing, an applied
// migration whose text changed is refused, a database newer than the program is refused, and a run
// can stop at a version (a version-1 database for the upgrade tests, tst_upgrade).
#include <QtTest>
#include <atomic>
#include <fstream>
#include <thread>

#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

class TestMigrations : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;

  std::string schemaFingerprint() {
    return std::to_string(db_->scalar("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON "
                                      "n.oid = c.relnamespace WHERE n.nspname = 'idem'")) +
           "/" +
           std::to_string(db_->scalar("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid "
                                      "= p.pronamespace WHERE n.nspname = 'idem'"));
  }

 private slots:
  void init() { db_ = std::make_unique<test::TestDatabase>("tst_migrations", false); }
  void cleanup() { db_.reset(); }

  void freshDatabaseGetsTheWholeSchema() {
    auto c = db_->connect();
    const MigrationReport report = migrate(*c, bundledMigrations());
    QCOMPARE(report.applied.size(), bundledMigrations().size());
    QCOMPARE(report.alreadyApplied, 0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations"),
             (long long)bundledMigrations().size());
    for (const char* table : {"records", "attempts", "transitions", "fund_flows", "retired_keys"}) {
      QCOMPARE(
          db_->scalar(
              std::string(
                  "SELECT count(*) FROM pg_tables WHERE schemaname = 'idem' AND tablename = '") +
              table + "'"),
          1LL);
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_views WHERE schemaname = 'idem' AND viewname = "
                         "'money_position'"),
             1LL);
    // One signature each, the version-1 ones gone; record_fund_flow has two: the gateway's word
    // and the claimant's, with its claim token.
    for (const auto& [fn, signatures] :
         std::initializer_list<std::pair<const char*, long long>>{{"begin", 1},
                                                                  {"complete", 1},
                                                                  {"fail", 1},
                                                                  {"mark_unknown", 1},
                                                                  {"settle", 1},
                                                                  {"resolve", 1},
                                                                  {"reconcile", 1},
                                                                  {"expire_leases", 1},
                                                                  {"record_fund_flow", 2},
                                                                  {"purge", 1},
                                                                  {"purge_retired", 1}}) {
      QCOMPARE(
          db_->scalar(std::string("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = "
                                  "p.pronamespace WHERE n.nspname = 'idem' AND proname = '") +
                      fn + "'"),
          signatures);
    }
  }

  void secondRunIsANoOp() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string before = schemaFingerprint();
    const long long appliedAt = db_->scalar(
        "SELECT extract(epoch FROM max(applied_at))::bigint FROM idem.schema_migrations");
    const MigrationReport again = migrate(*c, bundledMigrations());
    QVERIFY(again.applied.empty());
    QCOMPARE(again.alreadyApplied, (int)bundledMigrations().size());
    QCOMPARE(schemaFingerprint(), before);
    QCOMPARE(db_->scalar(
                 "SELECT extract(epoch FROM max(applied_at))::bigint FROM idem.schema_migrations"),
             appliedAt);
  }

  void tamperedAppliedMigrationIsRefused() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    std::vector<Migration> tampered = bundledMigrations();
    tampered[2].sql += "\n-- a harmless-looking edit\n";
    try {
      migrate(*c, tampered);
      QFAIL("a changed migration was accepted");
    } catch (const MigrationError& e) {
      const QString message = QString::fromUtf8(e.what());
      QVERIFY2(message.contains(QString::fromStdString(tampered[2].name)) &&
                   message.contains("checksum"),
               e.what());
    }
  }

  // Every text a migration was released in ends in the schema the file's text makes: texts whose
  // comments were reworded since, and 008's second text (begin's tombstone check under the
  // retention lock; 011 brings either text to the same functions). A database that recorded any
  // of them migrates with nothing to do and nothing changed; any other text is refused.
  void everyReleasedTextOfAMigrationIsAccepted() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string before = schemaFingerprint();
    const std::pair<int, const char*> released[] = {
        {1, "e12303dcb4454fb2669117d83f70a2ae82a1546244612e73f5b6e46cf0eb7731"},
        {5, "dc894d985ac05403ac1215aeb87adcbeded74ce085df5c1c9b2160d7df48cb85"},
        {6, "74d84a12a22fedd1f6696bc06e594bfb12529c9ee0ab7aa7b68c2b609660726b"},
        {7, "6f634bcf031360c97414343c7289314a5b78fd23bf6c77f6b98a7c63aa0d3fe7"},
        {8, "bb36a77114bbbb7e4d636f3673d46afb2e268866c10f1c443f13eae795cdcb09"},
        {8, "c7ea87ed222a9e991b32ce76f31c03aea64e805ed78218189f588a1490e9fa00"},
        {10, "2b7988ffb30abc5695a3a186954d5afb6f08cf61ec3962adb9ae027a88f9b6e1"},
        {12, "b758e4b89bbfe014f6022ab48c270d57c684de584e669e96cd6dc3228a82377c"},
        {13, "249fa4b955e461c13e7dd7d85c25df39d54884364c3d6efa1dfb20c6ffe7f7ca"},
    };
    for (const auto& [version, checksum] : released) {
      const std::string current = [&] {
        pqxx::nontransaction tx(*c);
        return std::string(tx.exec_params1("SELECT checksum FROM idem.schema_migrations "
                                           "WHERE version = $1",
                                           version)[0]
                               .c_str());
      }();
      db_->exec("UPDATE idem.schema_migrations SET checksum = '" + std::string(checksum) +
                "' WHERE version = " + std::to_string(version));
      const MigrationReport again = migrate(*c, bundledMigrations());
      QVERIFY2(again.applied.empty(), checksum);
      QCOMPARE(schemaFingerprint(), before);
      db_->exec("UPDATE idem.schema_migrations SET checksum = '" + current +
                "' WHERE version = " + std::to_string(version));
    }
    db_->exec("UPDATE idem.schema_migrations SET checksum = repeat('0', 64) WHERE version = 8");
    QVERIFY_THROWS_EXCEPTION(MigrationError, migrate(*c, bundledMigrations()));
  }

  void newMigrationsApplyInOrderAndFailuresRollBack() {
    auto c = db_->connect();
    std::vector<Migration> migrations = bundledMigrations();
    migrate(*c, std::vector<Migration>(migrations.begin(), migrations.begin() + 2));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations"), 2LL);
    // A broken migration after good ones: nothing of this run is kept.
    migrations.push_back(
        {999, "999_broken.sql", "CREATE TABLE idem.partial (x int); SELECT no_such_function();"});
    QVERIFY_THROWS_EXCEPTION(std::exception, migrate(*c, migrations));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations"), 2LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'partial'"), 0LL);
    migrations.pop_back();
    QCOMPARE(migrate(*c, migrations).applied.size(), migrations.size() - 2);
  }

  void upToStopsAtAVersionAndTheRestFollowsLater() {
    auto c = db_->connect();
    const MigrationReport v1 = migrate(*c, bundledMigrations(), MigrateOptions{.upTo = 5});
    QCOMPARE(v1.applied.size(), std::size_t(5));
    QCOMPARE(db_->scalar("SELECT max(version) FROM idem.schema_migrations"), 5LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                         "'idem' AND table_name = 'records' AND column_name = 'claim_token_hash'"),
             0LL);
    const MigrationReport v2 = migrate(*c, bundledMigrations());
    QCOMPARE(v2.applied.size(), bundledMigrations().size() - 5);
    QCOMPARE(v2.alreadyApplied, 5);
    QCOMPARE(db_->scalar("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                         "'idem' AND table_name = 'records' AND column_name = 'claim_token_hash'"),
             1LL);
  }

  void databaseNewerThanProgramIsRefused() {
    auto c = db_->connect();
    std::vector<Migration> migrations = bundledMigrations();
    migrations.push_back({900, "900_future.sql", "SELECT 1;"});
    migrate(*c, migrations);
    QVERIFY_THROWS_EXCEPTION(MigrationError, migrate(*c, bundledMigrations()));
  }

  // An idle reader's open transaction holds a lock a migration needs. migrate waits for it at
  // most --lock-timeout per attempt, so an agent's begin queued behind migrate's lock request is
  // answered within that; it says whom it waits for, tries again, and gives up after --lock-wait
  // with nothing applied. Once the reader is gone the same migration applies.
  void migrateNeverHoldsWritersLongerThanItsLockTimeout() {
    auto owner = db_->connect();
    migrate(*owner, bundledMigrations());
    const std::string writer = db_->createLoginRole("migrate_agent", "idem_writer");
    std::vector<Migration> withAlter = bundledMigrations();
    withAlter.push_back({900, "900_alter_records.sql",
                         "ALTER TABLE idem.records ADD COLUMN note_for_the_test text;"});
    auto readerConnection = db_->connect();
    pqxx::work reader(*readerConnection);
    reader.exec("SELECT count(*) FROM idem.records");  // holds ACCESS SHARE until it ends

    MigrateOptions options;
    options.lockTimeout = std::chrono::milliseconds(300);
    options.lockWait = std::chrono::milliseconds(2500);
    std::vector<std::string> waits;
    options.onWait = [&](const std::string& line) { waits.push_back(line); };
    std::atomic<bool> migrating{true};
    std::atomic<long long> slowestBeginMs{0};
    std::thread agent([&] {
      pqxx::connection c(db_->dsnAs(writer));
      ProtocolClient client(c);
      for (int i = 0; migrating; ++i) {
        const auto begin = std::chrono::steady_clock::now();
        client.begin(test::payRequest("m-" + std::to_string(i), "om-" + std::to_string(i)));
        const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - begin)
                                 .count();
        slowestBeginMs = std::max(slowestBeginMs.load(), ms);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    std::string error;
    try {
      migrate(*owner, withAlter, options);
    } catch (const MigrationError& e) {
      error = e.what();
    }
    migrating = false;
    agent.join();
    QVERIFY2(error.find("gave up after") != std::string::npos, error.c_str());
    QVERIFY2(
        error.find("pid " + std::to_string(readerConnection->backendpid())) != std::string::npos,
        error.c_str());
    QVERIFY(!waits.empty());
    QVERIFY2(waits.front().find("waited 300 ms for a lock held by pid") != std::string::npos,
             waits.front().c_str());
    QVERIFY2(slowestBeginMs.load() < 2000, std::to_string(slowestBeginMs.load()).c_str());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations WHERE version = 900"), 0LL);

    reader.commit();
    QCOMPARE(migrate(*owner, withAlter, options).applied.size(), std::size_t{1});
    db_->reset();
  }

  void folderOfFilesMatchesTheBundle() {
    const QByteArray source = qgetenv("IDEMWATCH_SOURCE_DIR");
    QVERIFY(!source.isEmpty());
    const auto fromFiles = loadMigrations(std::filesystem::path(source.constData()) / "sql");
    QCOMPARE(fromFiles.size(), bundledMigrations().size());
    for (std::size_t i = 0; i < fromFiles.size(); ++i) {
      QCOMPARE(fromFiles[i].name, bundledMigrations()[i].name);
      QVERIFY2(fromFiles[i].sql == bundledMigrations()[i].sql, "rebuild: the bundle is stale");
    }
    QVERIFY_THROWS_EXCEPTION(MigrationError, loadMigrations("/nonexistent/sql"));
    // The objects and the baseline, read as idemctl migrate --sql-dir reads them.
    const auto root = std::filesystem::path(source.constData()) / "sql";
    const SchemaObjects objects = loadObjects(root);
    QCOMPARE(objects.version, bundledObjects().version);
    QCOMPARE(objects.objects.size(), bundledObjects().objects.size());
    for (std::size_t i = 0; i < objects.objects.size(); ++i) {
      QCOMPARE(objects.objects[i].name, bundledObjects().objects[i].name);
      QVERIFY2(objects.objects[i].sql == bundledObjects().objects[i].sql, "rebuild: stale");
    }
    const Baseline baseline = loadBaseline(root);
    QCOMPARE(baseline.version, bundledBaseline().version);
    QVERIFY(baseline.tables == bundledBaseline().tables);
    QVERIFY(baseline.grants == bundledBaseline().grants);
    // A folder of numbered files alone has neither.
    QVERIFY(loadObjects(root / "migrations").objects.empty());
    QCOMPARE(loadBaseline(root / "migrations").version, 0);
  }
};

QTEST_GUILESS_MAIN(TestMigrations)
#include "tst_migrations.moc"

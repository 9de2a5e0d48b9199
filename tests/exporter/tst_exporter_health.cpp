// Per-collector health, as node_exporter's node_scrape_collector_duration_seconds and
// node_scrape_collector_success: every collector that runs has both series; one that fails (the
// function it reads renamed away) shows success 0 while the others stay 1, and 1 again once it
// recovers. On a primary the exporter says so: db_standby 0 and no replay lag.
#include <QtTest>
#include <set>

#include "exporter_harness.hpp"
#include "test_database.hpp"

using namespace idem::test;

namespace {

std::string collectorKey(const std::string& family, const std::string& collector) {
  return family + "{collector=\"" + collector + "\"}";
}

// collector -> success, for every collector_success series of the scrape.
std::map<std::string, double> successes(const Series& s) {
  const std::string prefix = "idempotency_exporter_collector_success{collector=\"";
  std::map<std::string, double> out;
  for (const auto& [key, v] : s) {
    if (key.starts_with(prefix)) out[key.substr(prefix.size(), key.size() - prefix.size() - 2)] = v;
  }
  return out;
}

}  // namespace

class TestExporterHealth : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

 private slots:
  void initTestCase() { db_ = std::make_unique<TestDatabase>("tst_exporter_health"); }
  void init() { db_->reset(); }

  void everyCollectorHasDurationAndSuccess() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    const auto all = successes(s);
    for (const char* name : {"unsettled_records", "requests", "transitions", "fund_flows"}) {
      QVERIFY2(all.count(name) == 1, name);
    }
    for (const auto& [name, ok] : all) {
      QVERIFY2(ok == 1.0, name.c_str());
      const auto d =
          value(s, collectorKey("idempotency_exporter_collector_duration_seconds", name));
      QVERIFY2(d && *d >= 0 && *d < 10, name.c_str());
    }
    QVERIFY(all.count("self_health") == 0);  // it reads nothing
  }

  // A collector whose own interval equals the collection interval (the reconciliation, with
  // --reconcile-interval = --collect-interval) runs in every collection, not every other one: its
  // due time and the collection's schedule are read from the same clock reading, and the loop
  // never wakes early. Each reconciliation stamps the database clock, so 8 collections in a row
  // show 8 stamps.
  void aCollectorDueEveryCollectionRunsInEveryCollection() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    std::set<double> stamps;
    for (int i = 0; i < 8; ++i) {
      QVERIFY(e.waitForCollections(1));
      const auto stamp =
          value(e.scrape(), "idempotency_exporter_last_reconcile_success_timestamp_seconds");
      QVERIFY(stamp && *stamp > 0);
      stamps.insert(*stamp);
    }
    QVERIFY2(stamps.size() >= 7, std::to_string(stamps.size()).c_str());
  }

  void aFailingCollectorShowsSuccessZeroWhileTheOthersStayOne() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    db_->exec(
        "ALTER FUNCTION idem.lease_expired(text, timestamptz) RENAME TO lease_expired_elsewhere");
    QVERIFY(waitUntil([&] { return successes(e.scrape())["unsettled_records"] == 0.0; }));
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    for (const auto& [name, ok] : successes(s)) {
      QCOMPARE(ok, name == "unsettled_records" ? 0.0 : 1.0);
    }
    QVERIFY(*value(s, "idempotency_exporter_collect_errors_total{stage=\"unsettled_records\"}") >=
            1.0);
    QCOMPARE(value(s, "idempotency_exporter_collect_errors_total{stage=\"requests\"}"),
             std::optional(0.0));
    db_->exec(
        "ALTER FUNCTION idem.lease_expired_elsewhere(text, timestamptz) RENAME TO lease_expired");
    QVERIFY(waitUntil([&] { return successes(e.scrape())["unsettled_records"] == 1.0; }));
  }

  void aPrimaryIsNoStandbyAndHasNoReplayLag() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    const Series s = e.scrape();
    QCOMPARE(value(s, "idempotency_exporter_db_standby"), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_replay_lag_seconds"), std::nullopt);
    const HttpAnswer landing = httpGet({e.url(QStringLiteral("/")), {}, {}});
    QVERIFY2(landing.body.contains("Database: a primary."), landing.body.constData());
  }

  // The durability collector publishes what idemctl doctor finds: here the server's own fsync, a
  // protocol login that turned synchronous_commit off, and no standby; whether one is synchronous
  // only to a login that may see it (pg_monitor).
  void theDurabilityCheckIsPublished() {
    const std::string careless = db_->createLoginRole("careless", "idem_writer");
    db_->exec("ALTER ROLE " + careless + " IN DATABASE " + db_->name() +
              " SET synchronous_commit = off");
    const double fsyncOff = db_->scalar(
        "SELECT count(*) FROM pg_settings WHERE name = 'fsync' "
        "AND setting <> 'on'");
    // A test server may itself run with synchronous_commit = off: then the server, not only the
    // login, is a finding, and the gauge stays raised once the login is fixed.
    const double serverCommitOff = db_->scalar(
        "SELECT count(*) FROM pg_settings WHERE name = 'synchronous_commit' "
        "AND coalesce(reset_val, setting) = 'off'");
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    const Series s = e.scrape();
    const auto problem = [&](const std::string& check) {
      return value(s, "idempotency_db_durability_problem{check=\"" + check + "\"}");
    };
    QCOMPARE(problem("synchronous_commit"), std::optional(1.0));
    QCOMPARE(problem("fsync"), std::optional(fsyncOff));
    QCOMPARE(problem("synchronous_standby"), std::optional(0.0));  // no standby: a note
    QCOMPARE(value(s, "idempotency_db_standbys"), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_db_synchronous_standbys"), std::optional(0.0));
    db_->exec("ALTER ROLE " + careless + " IN DATABASE " + db_->name() +
              " RESET synchronous_commit");

    const std::string reader = db_->createLoginRole("reader", "idem_reader");
    RunningExporter r(testOptions(db_->dsnAs(reader)));
    QVERIFY(r.waitForCollections(1));
    const Series seen = r.scrape();
    QCOMPARE(value(seen, "idempotency_db_synchronous_standbys"), std::nullopt);
    QCOMPARE(value(seen, "idempotency_db_durability_problem{check=\"synchronous_commit\"}"),
             std::optional(serverCommitOff));
  }

  // The history's day partitions: after migrate, made until the end of the seventh day after
  // today; with today's missing, until today's start, and its rows are seen in the DEFAULT
  // partition. Read as a reader login, from the catalog.
  void theHistoryDaysAheadArePublished() {
    const std::string reader = db_->createLoginRole("reader", "idem_reader");
    const auto scrape = [&] {
      RunningExporter e(testOptions(db_->dsnAs(reader)));
      return e.waitForCollections(1) ? e.scrape() : Series{};
    };
    const auto until = [](const Series& s, const std::string& table) {
      return value(
          s, "idempotency_history_partitioned_until_timestamp_seconds{table=\"" + table + "\"}");
    };
    const auto outside = [](const Series& s, const std::string& table) {
      return value(s, "idempotency_history_default_partition_rows{table=\"" + table + "\"}");
    };
    const auto dayStart = [&](int days) {
      return std::optional(static_cast<double>(
          db_->scalar("SELECT extract(epoch FROM ((now() AT TIME ZONE 'UTC')::date + " +
                      std::to_string(days) + ")::timestamp AT TIME ZONE 'UTC')::bigint")));
    };
    Series s = scrape();
    QCOMPARE(until(s, "attempts"), dayStart(8));
    QCOMPARE(until(s, "transitions"), dayStart(8));
    QCOMPARE(outside(s, "attempts"), std::optional(0.0));

    // Today's partition gone (and the upgraded table's, in case it covers today): today's rows
    // go to the DEFAULT partition.
    const std::string today = std::to_string(
        db_->scalar("SELECT to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD')::bigint"));
    db_->exec("DROP TABLE IF EXISTS idem.attempts_before_days; DROP TABLE idem.attempts_p" + today);
    db_->exec(
        "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, "
        "outcome, request_hash) VALUES ('k', 'payment', 'o', 'pay', 'initial', 'executed', 'h')");
    // The statistics' count arrives once the writing session has reported it.
    QTRY_VERIFY_WITH_TIMEOUT(db_->scalar("SELECT n_live_tup FROM pg_stat_all_tables WHERE relid = "
                                         "'idem.attempts_outside'::regclass") == 1,
                             10000);
    s = scrape();
    QCOMPARE(until(s, "attempts"), dayStart(0));
    QCOMPARE(until(s, "transitions"), dayStart(8));
    QCOMPARE(outside(s, "attempts"), std::optional(1.0));

    // Making the days again moves the row into its day.
    QCOMPARE(db_->scalar("SELECT idem.prepare_history_partitions()"), 1LL);
    s = scrape();
    QCOMPARE(until(s, "attempts"), dayStart(8));

    // Today covered by an upgraded database's old table, from MINVALUE to tomorrow.
    db_->exec("DROP TABLE idem.attempts_p" + today);
    s = scrape();
    QCOMPARE(until(s, "attempts"), dayStart(0));
    db_->exec(
        "DO $$ BEGIN EXECUTE format('CREATE TABLE idem.attempts_kept PARTITION OF idem.attempts "
        "FOR VALUES FROM (MINVALUE) TO (%L)', ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp "
        "AT TIME ZONE 'UTC'); END $$");
    s = scrape();
    QCOMPARE(until(s, "attempts"), dayStart(8));
  }
};

QTEST_GUILESS_MAIN(TestExporterHealth)
#include "tst_exporter_health.moc"

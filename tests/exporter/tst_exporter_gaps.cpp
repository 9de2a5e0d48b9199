// Exactly once under out-of-order commits: a transaction holding a lower id while later rows
// commit is counted once, when it commits; a rolled-back id is proven permanent and stops being
// tracked, without stalling the reader; a line recorded twice takes no id; the number of tracked
// gap ranges is bounded, and at the bound new rows wait rather than a gap being dropped, so a flood
// of burned ids never hides a duplicate flow.
#include <QtTest>
#include <pqxx/pqxx>

#include "exporter_harness.hpp"
#include "idem/protocol_client.hpp"
#include "incremental_reader.hpp"
#include "metric_keys.hpp"
#include "read_stats.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

BeginRequest request(const std::string& key) {
  return {key,        "payment",
          "o-" + key, "pay",
          {},         TriggerSource::Initial,
          "{}",       std::chrono::milliseconds(30'000),
          {},         {}};
}

constexpr const char* kBeginSql =
    "SELECT * FROM idem.begin($1, 'payment', $2, 'pay', NULL, 'initial', '{}'::jsonb)";

// An attempt as a transaction that began two hours ago writes it (created_at is now() of its
// transaction), committed now.
std::string oldAttempt(const std::string& key) {
  return "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source,"
         " outcome, request_hash, created_at) VALUES ('" +
         key + "', 'payment', 'o-" + key +
         "', 'pay', 'initial', 'executed', 'h', now() - interval '2 hours')";
}

double sumOf(const Series& s, const std::string& family) {
  double total = 0;
  for (const auto& [key, v] : s) {
    if (key.starts_with(family + "{")) total += v;
  }
  return total;
}

}  // namespace

class TestExporterGaps : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

  void beginCommitted(int from, int to) {
    auto c = db_->connect();
    ProtocolClient client(*c);
    for (int i = from; i < to; ++i) client.begin(request("k" + std::to_string(i)));
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<TestDatabase>("tst_exporter_gaps"); }
  void init() { db_->reset(); }

  void slowTransactionOnALowerIdIsCountedOnceWhenItCommits() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    auto slowConnection = db_->connect();
    pqxx::work slow(*slowConnection);
    slow.exec_params(kBeginSql, "k-slow", "o-slow");  // takes the lowest attempt and transition ids
    beginCommitted(0, 5);                             // later ids commit first
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 5.0);
    QCOMPARE(sumOf(s, "idempotency_transitions_total"), 5.0);
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(1.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "transitions")),
             std::optional(1.0));
    // Many collections later the gap is still awaited: its transaction may commit any time.
    QVERIFY(e.waitForCollections(5));
    s = e.scrape();
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(1.0));
    QCOMPARE(value(s, gapsResolvedKey("attempts", "expired")), std::optional(0.0));

    slow.commit();
    QVERIFY(e.waitForCollections(2));
    s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 6.0);
    QCOMPARE(sumOf(s, "idempotency_transitions_total"), 6.0);
    QCOMPARE(value(s, requestsKey("payment", "initial", "executed")), std::optional(6.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
    QCOMPARE(value(s, gapsResolvedKey("attempts", "filled")), std::optional(1.0));
    // And once only: later collections do not count it again.
    QVERIFY(e.waitForCollections(3));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 6.0);
    QCOMPARE(static_cast<double>(db_->scalar("SELECT count(*) FROM idem.attempts")), 6.0);
  }

  // The history is read from the last days' partitions only. A row whose transaction began long
  // before (its created_at is that transaction's start) and committed above the rows counted is
  // passed over by that read: found as a gap below a later row, or, the last row written, by the
  // read of every partition made every few collections, and counted once either way.
  void aRowOfAnOldTransactionAboveTheCountedRowsIsCountedOnce() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(0, 3);
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 3.0);
    db_->exec(oldAttempt("k-old"));
    beginCommitted(3, 5);
    QVERIFY(e.waitForCollections(3));
    Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 6.0);
    QCOMPARE(value(s, requestsKey("payment", "initial", "executed")), std::optional(6.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
    // The last row written, with none after it.
    db_->exec(oldAttempt("k-old-last"));
    QVERIFY(waitUntil([&] { return sumOf(e.scrape(), "idempotency_requests_total") == 7.0; }));
    QVERIFY(e.waitForCollections(15));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 7.0);
    QCOMPARE(static_cast<double>(db_->scalar("SELECT count(*) FROM idem.attempts")), 7.0);
  }

  // Started on an empty history, the reader knows no row's time: the first row, an old
  // transaction's, is read from every partition and counted once.
  void anOldTransactionsRowIntoAnEmptyHistoryIsCountedOnce() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    db_->exec(oldAttempt("k-old-first"));
    // At the next collections, not only at the read of every partition made once every twelve.
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 1.0);
    beginCommitted(0, 2);
    QVERIFY(waitUntil([&] { return sumOf(e.scrape(), "idempotency_requests_total") == 3.0; }));
    QVERIFY(e.waitForCollections(3));
    const Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 3.0);
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
  }

  // A long stretch of an old transaction's rows below a recent one is read again over every
  // partition, not left behind as one gap range whose recheck would fetch them all at once.
  void aStretchOfOldRowsIsReadNotLeftAsAGap() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    beginCommitted(0, 1);
    QVERIFY(waitUntil([&] { return sumOf(e.scrape(), "idempotency_requests_total") == 1.0; }));
    db_->exec(
        "INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, "
        "outcome, request_hash, created_at) SELECT 'k-old-' || g, 'payment', 'o-old-' || g, 'pay', "
        "'initial', 'executed', 'h', now() - interval '2 hours' FROM generate_series(1, 2500) AS "
        "g");
    beginCommitted(1, 2);
    QVERIFY(waitUntil([&] { return sumOf(e.scrape(), "idempotency_requests_total") == 2502.0; }));
    const Series s = e.scrape();
    QCOMPARE(value(s, gapsResolvedKey("attempts", "filled")), std::optional(0.0));
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
  }

  // At the start, the rows below the high-water mark are read from the day the earliest of them
  // was created on: an old transaction's row among them is read there, before the start, and never
  // counted later as if it were new.
  void anOldTransactionsRowBeforeTheStartIsNeverCounted() {
    beginCommitted(0, 2);
    db_->exec(oldAttempt("k-old"));
    beginCommitted(2, 4);
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(4));
    Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 0.0);
    QCOMPARE(value(s, tableKey("idempotency_exporter_open_gaps", "attempts")), std::optional(0.0));
    beginCommitted(4, 6);
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(sumOf(e.scrape(), "idempotency_requests_total"), 2.0);
  }

  // The start reads every row of the ratio window, however far below the high-water mark it
  // begins, and no row older than the window beyond the ids it checks for gaps.
  void theStartReadsTheWholeWindowAndNoOlderRows() {
    db_->exec(oldAttempt("k-old-1") + "; " + oldAttempt("k-old-2"));
    beginCommitted(0, 30);
    exporter::ReadStats stats({"attempts"});
    exporter::ReaderLimits limits;
    limits.window = std::chrono::hours(1);
    limits.startBackfillIds = 5;
    exporter::IncrementalReader reader(exporter::tableQueries("idem.attempts", "outcome"), limits,
                                       stats.table("attempts"));
    auto c = db_->connect();
    int rows = 0;
    std::string ids;
    reader.poll(*c, [&](const pqxx::row& row, exporter::RowOrigin origin) {
      QCOMPARE(origin, exporter::RowOrigin::BeforeStart);
      ++rows;
      ids += (ids.empty() ? "" : ",") + std::string(row[0].c_str());
    });
    QCOMPARE(rows, 30);
    QCOMPARE(static_cast<double>(
                 db_->scalar("SELECT count(*) FROM idem.attempts WHERE id = ANY('{" + ids +
                             "}'::bigint[]) AND created_at >= now() - interval '1 hour'")),
             30.0);
  }

  void rolledBackIdExpiresAndDoesNotStallTheReader() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    {
      auto c = db_->connect();
      pqxx::work tx(*c);
      tx.exec_params(kBeginSql, "k-gone", "o-gone");
      beginCommitted(0, 3);
      QVERIFY(e.waitForCollections(2));
      QCOMPARE(value(e.scrape(), tableKey("idempotency_exporter_open_gaps", "attempts")),
               std::optional(1.0));
      tx.abort();
    }
    QVERIFY(waitUntil([&] {
      return value(e.scrape(), tableKey("idempotency_exporter_open_gaps", "attempts")) ==
             std::optional(0.0);
    }));
    beginCommitted(3, 6);
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    QCOMPARE(sumOf(s, "idempotency_requests_total"), 6.0);
    QCOMPARE(value(s, gapsResolvedKey("attempts", "expired")), std::optional(1.0));
    QCOMPARE(value(s, gapsResolvedKey("attempts", "filled")), std::optional(0.0));
  }

  // A line the gateway reports twice takes no id (nothing to track); a flow rolled back takes one,
  // which is proven permanent and stops being tracked.
  void aRepeatedLineTakesNoIdAndARolledBackOneIsAPermanentGap() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    ProtocolClient client(*c);
    client.recordFundFlow({"payment", "o-1", FundFlowKind::Debit, 100, "CNY", "gw-1", {}});
    const long long before = db_->scalar("SELECT last_value FROM idem.fund_flows_id_seq");
    for (int i = 0; i < 20; ++i) {
      QVERIFY(client.recordFundFlow({"payment", "o-1", FundFlowKind::Debit, 100, "CNY", "gw-1", {}})
                  .alreadyRecorded);
    }
    QCOMPARE(db_->scalar("SELECT last_value FROM idem.fund_flows_id_seq"), before);
    {
      pqxx::work tx(*c);
      tx.exec(
          "SELECT * FROM idem.record_fund_flow('payment', 'o-1', 'DEBIT', 100, 'CNY', 'gw-rb')");
      tx.abort();
    }
    client.recordFundFlow(
        {"payment", "o-1", FundFlowKind::Debit, 100, "CNY", "gw-2", {}});         // a double charge
    QVERIFY(db_->scalar("SELECT max(id) - count(*) FROM idem.fund_flows") >= 1);  // there is a hole
    QVERIFY(waitUntil([&] {
      const Series s = e.scrape();
      return value(s, tableKey("idempotency_exporter_open_gaps", "fund_flows")) ==
                 std::optional(0.0) &&
             value(s, fundFlowsKey("payment", "DEBIT")) == std::optional(2.0);
    }));
    const Series s = e.scrape();
    QCOMPARE(value(s, duplicatesKey("payment", "DEBIT")), std::optional(1.0));
    QCOMPARE(value(s, gapsResolvedKey("fund_flows", "expired")), std::optional(1.0));
    QCOMPARE(value(s, gapsResolvedKey("fund_flows", "filled")), std::optional(0.0));
  }

  // At --max-tracked-gaps ranges awaiting their rows, the reader reads no new rows until some
  // resolve, and says so; every row is counted in the end.
  void atTheBoundOfTrackedGapsNewRowsWaitAndNoneIsLost() {
    auto options = testOptions(db_->dsn());
    options.maxTrackedGaps = 3;
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    // Five ranges of ids consumed by rolled-back inserts, each followed by a committed row.
    for (int i = 0; i < 5; ++i) {
      pqxx::work tx(*c);
      tx.exec_params(kBeginSql, "k-rb" + std::to_string(i), "o-rb" + std::to_string(i));
      tx.abort();
      beginCommitted(i, i + 1);
    }
    QVERIFY(waitUntil([&] {
      const Series s = e.scrape();
      return sumOf(s, "idempotency_requests_total") == 5.0 &&
             value(s, tableKey("idempotency_exporter_open_gaps", "attempts")) == std::optional(0.0);
    }));
    QVERIFY(*value(e.scrape(), tableKey("idempotency_exporter_reads_deferred_total", "attempts")) >=
            0.0);
  }

  // The attack a review played: a writer holds a duplicate DEBIT in an open transaction, then
  // burns more ids than --max-tracked-gaps, by refused calls on a line already recorded and by
  // rolled-back inserts between other flows. The reader, at its bound, waits instead of dropping
  // the held id; when the duplicate commits it is counted.
  void aGapFloodNeverHidesADuplicateFlow() {
    auto options = testOptions(db_->dsn());
    options.maxTrackedGaps = 4;
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    auto c = db_->connect();
    ProtocolClient ledger(*c);
    ledger.recordFundFlow({"payment", "o-paid", FundFlowKind::Debit, 2990, "CNY", "gw-first", {}});
    auto heldConnection = db_->connect();
    pqxx::work held(*heldConnection);
    held.exec(
        "SELECT * FROM idem.record_fund_flow('payment', 'o-paid', 'DEBIT', 2990, 'CNY', "
        "'gw-second')");
    for (int i = 0; i < 30; ++i) {
      // Refused: the same line again (no id taken any more).
      ledger.recordFundFlow(
          {"payment", "o-paid", FundFlowKind::Debit, 2990, "CNY", "gw-first", {}});
      // Burned: an insert rolled back, between two flows of others, so the gaps do not join up.
      pqxx::work burn(*c);
      burn.exec(
          "SELECT * FROM idem.record_fund_flow('payment', 'o-burn', 'DEBIT', 1, 'CNY', "
          "'burn-" +
          std::to_string(i) + "')");
      burn.abort();
      ledger.recordFundFlow({"payment",
                             "o-other-" + std::to_string(i),
                             FundFlowKind::Debit,
                             1,
                             "CNY",
                             "gw-other-" + std::to_string(i),
                             {}});
    }
    QVERIFY(e.waitForCollections(3));
    held.commit();
    QVERIFY(waitUntil([&] {
      const Series s = e.scrape();
      return value(s, duplicatesKey("payment", "DEBIT")) == std::optional(1.0) &&
             value(s, fundFlowsKey("payment", "DEBIT")) ==
                 std::optional(static_cast<double>(
                     db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind = 'DEBIT'")));
    }));
    QVERIFY(*value(e.scrape(),
                   tableKey("idempotency_exporter_reads_deferred_total", "fund_flows")) > 0.0);
  }
};

QTEST_GUILESS_MAIN(TestExporterGaps)
#include "tst_exporter_gaps.moc"

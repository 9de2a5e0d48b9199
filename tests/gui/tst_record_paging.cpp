// Filters and keyset paging return exactly the rows SQL says, page after page, in all four orders,
// with many rows sharing a timestamp so that page boundaries fall inside groups of ties. Typed text
// (quotes, backslashes, LIKE wildcards, SQL fragments) is matched as data. Stale answers are
// dropped, and a refresh applies changes in place.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>

#include "admin_fixture.hpp"
#include "idem/protocol_client.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "models/timestamps.hpp"

using namespace idem;
using namespace idem::admin;

namespace {

// 640 rows: statuses cycling, three biz types, created_at in groups of 4 equal values, updated_at
// taking 97 values in an order unrelated to the keys (so ties are common and keyed "randomly"),
// microsecond timestamps, keys with quotes and backslashes, biz ids with LIKE wildcards and decoys.
constexpr const char* kSeed = R"SQL(
INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, attempt_count, created_at, updated_at)
SELECT 'k-' || lpad(g::text, 4, '0') || CASE WHEN g % 7 = 0 THEN '''q' WHEN g % 11 = 0 THEN '\b' ELSE '' END,
       (ARRAY['payment', 'refund', 'coupon'])[1 + g % 3],
       CASE WHEN g % 13 = 0 THEN 'o''br\%_' || g
            WHEN g % 17 = 0 THEN 'o''br%X' || g
            ELSE 'ord-' || lpad((g / 10)::text, 3, '0') || '-' || g END,
       'pay', md5(g::text),
       (ARRAY['SUCCESS', 'SUCCESS', 'FAILED', 'PROCESSING', 'UNKNOWN'])[1 + g % 5],
       1 + g % 3,
       CASE WHEN g % 2 = 0 THEN timestamptz '2024-01-01' ELSE now() + interval '1 day' END,
       1,
       timestamptz '2024-01-01 08:00:00.000007' + (g / 4) * interval '1 second',
       timestamptz '2024-02-01 10:00:00.123457' + ((g * 37) % 97) * interval '250 milliseconds'
FROM generate_series(1, 640) AS g;
INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, attempt_count, created_at, updated_at)
SELECT 'recent-' || g, 'payment', 'rec-' || g, 'pay', 'h', 'SUCCESS', 2, NULL, 1,
       now() - interval '20 minutes', now() - interval '10 minutes'
FROM generate_series(1, 3) AS g;
)SQL";

struct Order {
  RecordOrder order;
  const char* sql;
};

constexpr Order kOrders[] = {
    {RecordOrder::UpdatedDesc, "updated_at DESC, idempotency_key DESC"},
    {RecordOrder::UpdatedAsc, "updated_at ASC, idempotency_key ASC"},
    {RecordOrder::CreatedDesc, "created_at DESC, idempotency_key DESC"},
    {RecordOrder::CreatedAsc, "created_at ASC, idempotency_key ASC"},
};

Timestamp at(const char* iso) {
  return fromDateTime(QDateTime::fromString(QString::fromLatin1(iso), Qt::ISODateWithMs));
}

}  // namespace

class TestRecordPaging : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<DatabaseSession> session_;

  void addCase(const char* name, RecordFilter filter, const std::string& where) {
    for (const Order& o : kOrders) {
      filter.order = o.order;
      QTest::newRow((std::string(name) + " / " + o.sql).c_str())
          << filter
          << QString::fromStdString("SELECT idempotency_key FROM idem.records WHERE " + where +
                                    " ORDER BY " + o.sql);
    }
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_record_paging");
    test::execWithoutRecordTriggers(*db_, kSeed);
    db_->exec("ANALYZE idem.records");
    // The point of the exercise: many page boundaries fall inside a group of equal timestamps.
    QVERIFY(db_->scalar("SELECT count(*) FROM (SELECT updated_at FROM idem.records GROUP BY 1 "
                        "HAVING count(*) > 3) t") > 50);
    QVERIFY(db_->scalar("SELECT count(*) FROM (SELECT created_at FROM idem.records GROUP BY 1 "
                        "HAVING count(*) = 4) t") > 100);
    session_ = test::connectedSession(db_->dsn());
    QVERIFY(session_->isConnected());
  }

  void pagesMatchSql_data() {
    QTest::addColumn<RecordFilter>("filter");
    QTest::addColumn<QString>("sql");
    addCase("everything", {}, "true");
    RecordFilter f;
    f.statuses = {RecordStatus::Success};
    addCase("SUCCESS", f, "status = 'SUCCESS'");
    f.statuses = {RecordStatus::Processing, RecordStatus::Unknown};
    addCase("unsettled", f, "status IN ('PROCESSING', 'UNKNOWN')");
    f = {};
    f.stuckOnly = true;
    addCase("stuck", f,
            "(status = 'UNKNOWN' OR (status = 'PROCESSING' AND lease_expires_at < now()))");
    f = {};
    f.bizType = "refund";
    addCase("biz type", f, "biz_type = 'refund'");
    f = {};
    f.key = "k-0007'q";
    addCase("key with a quote", f, "idempotency_key = 'k-0007''q'");
    f.key = "k-0011\\b";
    addCase("key with a backslash", f, "idempotency_key = 'k-0011\\b'");
    f = {};
    f.bizIdPrefix = "ord-01";
    addCase("biz id prefix", f, "left(biz_id, 6) = 'ord-01'");
    f.bizIdPrefix = "o'br\\%_";
    addCase("prefix with quote, backslash and wildcards", f, "left(biz_id, 7) = 'o''br\\%_'");
    f = {};
    f.from = at("2024-02-01T10:00:05.123457Z");
    f.to = at("2024-02-01T10:00:15.123Z");
    for (const Order& o : kOrders) {
      // The range applies to the sorted column; for the created orders it selects nothing here,
      // which is also what SQL says.
      RecordFilter g = f;
      g.order = o.order;
      const std::string column = sortsByUpdated(o.order) ? "updated_at" : "created_at";
      QTest::newRow((std::string("time range / ") + o.sql).c_str())
          << g
          << QString::fromStdString("SELECT idempotency_key FROM idem.records WHERE " + column +
                                    " >= '2024-02-01 10:00:05.123457+00' AND " + column +
                                    " < '2024-02-01 10:00:15.123+00' ORDER BY " + o.sql);
    }
    f = {};
    f.within = std::chrono::hours(1);
    addCase("within the last hour", f, "updated_at >= now() - interval '1 hour'");
    f = {};
    f.statuses = {RecordStatus::Success, RecordStatus::Failed};
    f.bizType = "payment";
    f.bizIdPrefix = "ord-0";
    addCase(
        "combined", f,
        "status IN ('SUCCESS', 'FAILED') AND biz_type = 'payment' AND left(biz_id, 5) = 'ord-0'");
  }

  void pagesMatchSql() {
    QFETCH(RecordFilter, filter);
    QFETCH(QString, sql);
    if (filter.within && !sortsByUpdated(filter.order))
      return;  // `within` checked on updated_at only
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPageSize(7);
    model.setFilter(filter);
    QVERIFY(test::loadEverything(model));
    const auto expected = test::keysBySql(*db_, sql.toStdString());
    QCOMPARE(test::keysOf(model), expected);
    QCOMPARE(model.canFetchMore({}), false);
  }

  void pageOfOneRowWalksEveryTie() {
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPageSize(1);
    RecordFilter f;
    f.bizType = "coupon";
    f.order = RecordOrder::CreatedDesc;
    model.setFilter(f);
    QVERIFY(test::loadEverything(model, 60000));
    QCOMPARE(test::keysOf(model),
             test::keysBySql(*db_,
                             "SELECT idempotency_key FROM idem.records WHERE biz_type = 'coupon' "
                             "ORDER BY created_at DESC, idempotency_key DESC"));
  }

  void sqlFragmentsMatchNothingAndChangeNothing() {
    const long long before = db_->scalar("SELECT count(*) FROM idem.records");
    for (const std::string& text :
         {std::string("x' OR '1'='1"), std::string("'; DROP TABLE idem.records; --"),
          std::string("%"), std::string("_"), std::string("\\")}) {
      for (int field = 0; field < 3; ++field) {
        RecordFilter f;
        (field == 0 ? f.key : field == 1 ? f.bizIdPrefix : f.bizType) = text;
        RecordTableModel model(session_.get());
        model.setFilter(f);
        QVERIFY(test::loadEverything(model));
        QVERIFY2(model.rowCount() == 0, text.c_str());
      }
    }
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), before);
  }

  void staleAnswersAreDropped() {
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy fetched(&model, &RecordTableModel::fetched);
    RecordFilter a;
    a.bizType = "payment";
    RecordFilter b;
    b.bizType = "refund";
    model.setFilter(a);
    model.setFilter(b);  // a's request is now stale: skipped by the worker or ignored on arrival
    QVERIFY(test::loadEverything(model));
    for (int r = 0; r < model.rowCount(); ++r)
      QCOMPARE(model.recordAt(r)->bizType, std::string("refund"));
    for (const auto& call : fetched) {
      for (const Record& rec : call.at(0).value<RecordPage>().records)
        QCOMPARE(rec.bizType, std::string("refund"));
    }
  }

  void refreshMovesChangedRowsAndKeepsPersistentIndexes() {
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    const Claim refreshA = test::claim(client, test::paymentRequest("refresh-a", "ord-refresh-a"));
    client.begin(test::paymentRequest("refresh-b", "ord-refresh-b"));

    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPageSize(20);
    model.setFilter({});
    QTRY_VERIFY(!model.isLoading());
    model.fetchMore({});
    QTRY_VERIFY(!model.isLoading());
    QCOMPARE(model.rowCount(), 40);
    const int rowA = model.rowOfKey("refresh-a");
    QVERIFY(rowA >= 0);
    const QPersistentModelIndex followA = model.index(rowA, RecordTableModel::Key);
    const QPersistentModelIndex followLast = model.index(39, RecordTableModel::Key);
    const std::string lastKey = model.recordAt(39)->idempotencyKey;
    const std::string lastUpdated =
        test::textBySql(*db_, "SELECT updated_at FROM idem.records WHERE idempotency_key = " +
                                  owner->quote(lastKey));

    // a changes (moves to the top), a new record arrives, b is deleted.
    QVERIFY(client.complete("refresh-a", refreshA.version, R"({"ok": true})", refreshA.token).ok());
    client.begin(test::paymentRequest("refresh-new", "ord-refresh-new"));
    db_->exec("DELETE FROM idem.records WHERE idempotency_key = 'refresh-b'");

    QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
    model.refresh();
    QTRY_VERIFY(!model.isLoading());
    QCOMPARE(resets.count(), 0);
    // The tester fetches more as rows arrive, like a view would: once that settles, the model must
    // hold a prefix of the order, at least the span loaded before (through the old last row).
    QVERIFY(test::waitUntil([&] { return !model.isLoading(); }));
    const long long span =
        db_->scalar("SELECT count(*) FROM idem.records WHERE (updated_at, idempotency_key) >= (" +
                    owner->quote(lastUpdated) + "::timestamptz, " + owner->quote(lastKey) + ")");
    QVERIFY(model.rowCount() >= span);
    const auto expected = test::keysBySql(*db_,
                                          "SELECT idempotency_key FROM idem.records ORDER BY "
                                          "updated_at DESC, idempotency_key DESC LIMIT " +
                                              std::to_string(model.rowCount()));
    QCOMPARE(test::keysOf(model), expected);
    QCOMPARE(model.recordAt(0)->idempotencyKey, std::string("refresh-new"));
    QVERIFY(followA.isValid());
    QCOMPARE(followA.data(RecordTableModel::KeyRole).toString(), QStringLiteral("refresh-a"));
    QCOMPARE(followA.data(RecordTableModel::StatusRole).toInt(),
             static_cast<int>(RecordStatus::Success));
    QCOMPARE(followLast.data(RecordTableModel::KeyRole).toString(),
             QString::fromStdString(lastKey));
    QCOMPARE(model.rowOfKey("refresh-b"), -1);
  }
};

QTEST_GUILESS_MAIN(TestRecordPaging)
#include "tst_record_paging.moc"

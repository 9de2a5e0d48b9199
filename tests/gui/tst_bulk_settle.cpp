// Bulk settle against a real PostgreSQL with real rivals: 500 stuck records settled in one run
// while, on their own threads and connections, 10 claimants complete their records late and a
// second operator settles 20 of them. Every record ends with exactly one decision (counted in SQL),
// the result table names each refused record and why, the history shows who decided and with what
// reason. The cap refuses 1,001 records and a blank reason before anything is sent; a cancel
// midway leaves each record settled once or untouched; the result table's CSV round-trips.
#include <QAbstractItemModelTester>
#include <QBuffer>
#include <QSignalSpy>
#include <QtTest>
#include <array>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "admin_fixture.hpp"
#include "idem/settlement.hpp"
#include "models/bulk_settle.hpp"
#include "models/csv_writer.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "widgets/bulk_settle_dialog.hpp"
#include "widgets/main_window.hpp"
#include "widgets/record_table_view.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

constexpr const char* kReason = "gateway outage 2026-12-01: no charge on the bank statement";
constexpr const char* kBobReason = "bob: looked each one up on the gateway console";

// RFC 4180, as writeCsv writes it: quoted fields may hold commas, quotes and line breaks.
std::vector<QStringList> parseCsv(const QString& text) {
  std::vector<QStringList> rows;
  QStringList row;
  QString field;
  bool quoted = false;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    if (quoted) {
      if (c == QLatin1Char('"') && i + 1 < text.size() && text[i + 1] == QLatin1Char('"')) {
        field += c;
        ++i;
      } else if (c == QLatin1Char('"')) {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == QLatin1Char('"')) {
      quoted = true;
    } else if (c == QLatin1Char(',')) {
      row << field;
      field.clear();
    } else if (c == QLatin1Char('\r')) {
      // the CRLF's first half
    } else if (c == QLatin1Char('\n')) {
      row << field;
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

RecordFilter stuckOf(const std::string& bizType) {
  RecordFilter f;
  f.bizType = bizType;
  f.stuckOnly = true;
  return f;
}

}  // namespace

class TestBulkSettle : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  std::string alice_;
  std::string bob_;
  std::unique_ptr<DatabaseSession> session_;

  // `count` UNKNOWN records of `bizType` through the protocol (claimed, then marked unknown by
  // their claimant), plus `processing` PROCESSING ones past their lease whose claims are returned.
  std::vector<Claim> seed(const std::string& bizType, int count, int processing = 0) {
    auto c = db_->connect();
    ProtocolClient client(*c);
    std::vector<Claim> claims;
    for (int i = 0; i < processing; ++i) {
      BeginRequest r = test::paymentRequest(bizType + "-late-" + std::to_string(i),
                                            bizType + "-ord-late-" + std::to_string(i), 1ms);
      r.bizType = bizType;
      claims.push_back(test::claim(client, r));
    }
    for (int i = 0; i < count - processing; ++i) {
      BeginRequest r = test::paymentRequest(bizType + "-" + std::to_string(i),
                                            bizType + "-ord-" + std::to_string(i));
      r.bizType = bizType;
      const Claim claim = test::claim(client, r);
      client.markUnknown(claim.key, claim.version, "gateway timeout after 5s", claim.token);
    }
    // The short leases must be over before anyone lists the records.
    test::waitUntil([&] {
      return db_->scalar("SELECT count(*) FROM idem.records WHERE biz_type = '" + bizType +
                         "' AND status = 'PROCESSING' AND lease_expires_at >= now()") == 0;
    });
    return claims;
  }

  BulkListing list(const std::string& bizType) {
    auto c = db_->connect();
    return listMatching(*c, stuckOf(bizType));
  }

  static bool waitFinished(BulkSettle& run) {
    return test::waitUntil([&] { return !run.isRunning(); }, 120000);
  }

  // Decisions (to SUCCESS or FAILED) per key of bizType, counted by the database.
  std::map<std::string, long long> decisionsPerKey(const std::string& bizType) {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    std::map<std::string, long long> out;
    for (const auto& row : tx.exec_params(
             "SELECT r.idempotency_key, count(t.id) FILTER (WHERE t.to_status IN ('SUCCESS', "
             "'FAILED')) FROM idem.records r LEFT JOIN idem.transitions t USING (idempotency_key) "
             "WHERE r.biz_type = $1 GROUP BY 1",
             bizType)) {
      out[row[0].c_str()] = row[1].as<long long>();
    }
    return out;
  }

  // The deciding transition of each key: actor, actor kind, reason.
  std::map<std::string, std::array<std::string, 3>> deciders(const std::string& bizType) {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    std::map<std::string, std::array<std::string, 3>> out;
    for (const auto& row :
         tx.exec_params("SELECT t.idempotency_key, t.actor, t.actor_kind, coalesce(t.reason, '') "
                        "FROM idem.transitions t JOIN idem.records r USING (idempotency_key) "
                        "WHERE r.biz_type = $1 AND t.to_status IN ('SUCCESS', 'FAILED')",
                        bizType)) {
      out[row[0].c_str()] = {row[1].c_str(), row[2].c_str(), row[3].c_str()};
    }
    return out;
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_bulk_settle");
    alice_ = db_->createLoginRole("alice", "idem_operator");
    bob_ = db_->createLoginRole("bob", "idem_operator");
    session_ = test::connectedSession(db_->dsnAs(alice_));
    QVERIFY(session_->isConnected());
  }

  void cleanupTestCase() { session_.reset(); }

  void everyRecordGetsExactlyOneDecisionAgainstClaimantsAndASecondOperator() {
    const std::vector<Claim> late = seed("race", 500, 10);
    const BulkListing listing = list("race");
    QCOMPARE(listing.matching, 500);
    QCOMPARE(listing.targets.size(), std::size_t(500));

    // Bob takes 20 records the run reaches late; the claimants' records are the oldest, listed
    // last (updated, newest first).
    std::vector<BulkTarget> bobs(listing.targets.begin() + 400, listing.targets.begin() + 420);

    BulkSettle run(session_.get());
    QAbstractItemModelTester tester(run.results(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    run.setChunkSize(10);
    QVERIFY(run.start(listing.targets, {RecordStatus::Failed, kReason}));

    std::atomic<int> claimantsOk{0};
    std::atomic<int> bobSettled{0};
    std::thread claimants([&] {
      auto c = db_->connect();
      ProtocolClient client(*c);
      for (const Claim& claim : late) {
        std::this_thread::sleep_for(20ms);
        if (client.complete(claim.key, claim.version, R"({"charged": false})", claim.token).ok()) {
          ++claimantsOk;
        }
      }
    });
    std::thread bob([&] {
      pqxx::connection c(db_->dsnAs(bob_));
      for (const BulkTarget& t : bobs) {
        SettleRequest r;
        r.key = t.key;
        r.expectedVersion = t.version;
        r.to = RecordStatus::Failed;
        r.reason = kBobReason;
        if (settleRecord(c, r).verdict == SettleVerdict(ResultCode::Ok)) ++bobSettled;
      }
    });
    QVERIFY(waitFinished(run));
    claimants.join();
    bob.join();

    // Exactly one decision per record, whoever made it.
    const auto decisions = decisionsPerKey("race");
    QCOMPARE(decisions.size(), std::size_t(500));
    for (const auto& [key, n] : decisions) QVERIFY2(n == 1, key.c_str());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE biz_type = 'race' AND status IN "
                         "('PROCESSING', 'UNKNOWN')"),
             0LL);

    // The result table accounts for every record; what it says settled, alice decided, with the
    // bulk reason; what it says refused, someone else decided first, and it says why.
    BulkResultModel* results = run.results();
    QCOMPARE(results->rowCount(), 500);
    const auto who = deciders("race");
    int refused = 0;
    for (const BulkResult& r : results->rows()) {
      const auto& [actor, kind, reason] = who.at(r.key);
      if (r.kind == BulkResult::Kind::Settled) {
        QCOMPARE(actor, alice_);
        QCOMPARE(kind, std::string("operator"));
        QCOMPARE(reason, std::string(kReason));
        QCOMPARE(r.code, std::string("ok"));
      } else {
        QCOMPARE(int(r.kind), int(BulkResult::Kind::Refused));
        QVERIFY2(actor != alice_, r.key.c_str());
        QVERIFY2(r.code == "conflict" || r.code == "invalid_transition", r.code.c_str());
        QVERIFY(!r.message.empty());
        ++refused;
        if (actor == bob_) {
          QCOMPARE(kind, std::string("operator"));
          QCOMPARE(reason, std::string(kBobReason));
        } else {
          QCOMPARE(kind, std::string("system"));  // the claimant's own answer
        }
      }
    }
    QCOMPARE(refused, claimantsOk.load() + bobSettled.load());
    QCOMPARE(results->count(BulkResult::Kind::Settled), 500 - refused);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor = '" + alice_ +
                         "' AND reason = '" + kReason + "'"),
             static_cast<long long>(500 - refused));
    // Every bulk decision names its batch in the evidence.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor = '" + alice_ +
                         "' AND (evidence -> 'bulk_settle' ->> 'records')::int = 500"),
             static_cast<long long>(500 - refused));
    qInfo() << results->summary();
    QVERIFY(refused > 0);  // the rivals won some: the race was real
    QVERIFY(results->summary().startsWith(QStringLiteral("%1 settled").arg(500 - refused)));
  }

  void theCapRefuses1001RecordsAndABlankReasonBeforeSending() {
    std::vector<BulkTarget> many;
    for (int i = 0; i < 1001; ++i) many.push_back({"cap-" + std::to_string(i), 2});
    BulkSettle run(session_.get());
    QSignalSpy ended(session_.get(), &DatabaseSession::requestEnded);
    QVERIFY(!run.start(many, {RecordStatus::Failed, kReason}));
    QVERIFY2(run.refusal().contains(QStringLiteral("1,001")), qPrintable(run.refusal()));
    QVERIFY(run.refusal().contains(QStringLiteral("cap of 1,000")));
    many.pop_back();
    QVERIFY(!run.start(many, {RecordStatus::Failed, " \t\n "}));
    QVERIFY(run.refusal().contains(QStringLiteral("reason is required")));
    QVERIFY(!run.start(many, {RecordStatus::Unknown, kReason}));
    QVERIFY(!run.isRunning());
    QTest::qWait(100);
    QCOMPARE(ended.count(), 0);  // nothing was sent

    // "All matching the filter" counts on the server: 1,001 matching records are refused by the
    // dialog although only the first 1,000 are listed.
    test::insertBulkRecords(*db_, {"cap-", "cap", "pay", "UNKNOWN", 1001, "1 second"});
    BulkSettleDialog dialog(session_.get());
    QSignalSpy listed(&dialog, &BulkSettleDialog::listed);
    dialog.listMatching(stuckOf("cap"));
    QVERIFY(listed.wait(15000));
    QCOMPARE(dialog.matchingCount(), 1001);
    QCOMPARE(dialog.targetCount(), 1000);
    QVERIFY2(dialog.countText().contains(QStringLiteral("1,001")), qPrintable(dialog.countText()));
    QVERIFY(dialog.countText().contains(QStringLiteral("cap of 1,000")));
    dialog.chooseTarget(RecordStatus::Failed);
    dialog.setReason(QString::fromUtf8(kReason));
    QVERIFY(!dialog.start());
    QVERIFY2(dialog.message().contains(QStringLiteral("1,001")), qPrintable(dialog.message()));
    QTest::qWait(200);
    // Still all UNKNOWN, and not one transition written.
    QCOMPARE(test::textBySql(*db_,
                             "SELECT (SELECT count(*) FROM idem.records WHERE biz_type = 'cap' AND "
                             "status = 'UNKNOWN') || ' unknown, ' || (SELECT count(*) FROM "
                             "idem.transitions WHERE idempotency_key LIKE 'cap-%') || ' changes'"),
             std::string("1001 unknown, 0 changes"));
  }

  void cancelMidwayLeavesEachRecordSettledOnceOrUntouched() {
    seed("cancel", 300);
    const BulkListing listing = list("cancel");
    QCOMPARE(listing.targets.size(), std::size_t(300));
    std::map<std::string, int> listedVersion;
    for (const BulkTarget& t : listing.targets) listedVersion[t.key] = t.version;

    // Cancelled while a chunk is under way on the worker, once the database shows it started.
    BulkSettle run(session_.get());
    run.setChunkSize(100);
    QVERIFY(run.start(listing.targets, {RecordStatus::Failed, kReason}));
    QVERIFY(test::waitUntil(
        [&] {
          return db_->scalar(
                     "SELECT count(*) FROM idem.transitions WHERE idempotency_key LIKE "
                     "'cancel-%' AND actor_kind = 'operator'") >= 10;
        },
        30000));
    run.cancel();
    QVERIFY(waitFinished(run));
    QVERIFY(run.wasCancelled());

    BulkResultModel* results = run.results();
    QCOMPARE(results->rowCount(), 300);  // every record accounted for
    const int settled = results->count(BulkResult::Kind::Settled);
    QVERIFY2(settled >= 10 && settled < 300, qPrintable(QString::number(settled)));
    QCOMPARE(results->count(BulkResult::Kind::NotRun), 300 - settled);

    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    const auto decisions = decisionsPerKey("cancel");
    for (const BulkResult& r : results->rows()) {
      const pqxx::row now = tx.exec_params1(
          "SELECT status, version FROM idem.records WHERE idempotency_key = $1", r.key);
      if (r.kind == BulkResult::Kind::Settled) {
        QCOMPARE(decisions.at(r.key), 1LL);
        QCOMPARE(std::string(now[0].c_str()), std::string("FAILED"));
        QCOMPARE(now[1].as<int>(), listedVersion[r.key] + 1);
      } else {
        QCOMPARE(r.code, std::string("cancelled"));
        QCOMPARE(decisions.at(r.key), 0LL);
        QCOMPARE(std::string(now[0].c_str()), std::string("UNKNOWN"));
        QCOMPARE(now[1].as<int>(), listedVersion[r.key]);
      }
    }
  }

  void theResultTableRoundTripsThroughCsv() {
    seed("csv", 6);
    BulkListing listing = list("csv");
    QCOMPARE(listing.targets.size(), std::size_t(6));
    listing.targets[1].version -= 1;                                // stale: conflict
    listing.targets.push_back({"csv-no-such-key, \"quoted\"", 1});  // not_found, needs quoting
    BulkSettle run(session_.get());
    QVERIFY(run.start(listing.targets, {RecordStatus::Failed, kReason}));
    QVERIFY(waitFinished(run));
    BulkResultModel* results = run.results();
    QCOMPARE(results->rowCount(), 7);
    QCOMPARE(QString::fromStdString(results->rowAt(1)->code), QStringLiteral("conflict"));
    QCOMPARE(QString::fromStdString(results->rowAt(6)->code), QStringLiteral("not_found"));

    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QCOMPARE(writeCsv(*results, buffer, BulkResultModel::ExportRole), 7);
    const std::vector<QStringList> rows = parseCsv(QString::fromUtf8(buffer.data()));
    QCOMPARE(rows.size(), std::size_t(8));
    for (int c = 0; c < BulkResultModel::ColumnCount; ++c) {
      QCOMPARE(rows[0][c], results->headerData(c, Qt::Horizontal).toString());
    }
    for (int r = 0; r < results->rowCount(); ++r) {
      QCOMPARE(rows[static_cast<std::size_t>(r + 1)].size(), int(BulkResultModel::ColumnCount));
      for (int c = 0; c < BulkResultModel::ColumnCount; ++c) {
        QCOMPARE(rows[static_cast<std::size_t>(r + 1)][c],
                 results->data(results->index(r, c), BulkResultModel::ExportRole).toString());
      }
    }
  }

  void theWindowSettlesTheSelectedRows() {
    seed("window", 4);
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    MainWindow w(o);
    w.connectTo(test::settingsFor(db_->dsnAs(alice_)));
    w.show();
    QVERIFY(w.recordsView()->actions().contains(w.bulkSettleAction()));
    QVERIFY(w.recordsView()->actions().contains(w.bulkSettleMatchingAction()));
    QVERIFY(test::waitUntil([&] {
      return w.session()->isConnected() && w.recordsModel()->rowOfKey("window-0") >= 0 &&
             w.recordsModel()->rowOfKey("window-3") >= 0;
    }));
    QItemSelectionModel* selection = w.recordsView()->selectionModel();
    for (const char* key : {"window-0", "window-2", "window-3"}) {
      selection->select(w.recordsModel()->index(w.recordsModel()->rowOfKey(key), 0),
                        QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
    BulkSettleDialog* d = w.openBulkSettle(false);
    QVERIFY(d != nullptr);
    QCOMPARE(d->targetCount(), 3);
    d->chooseTarget(RecordStatus::Failed);
    d->setReason(QString::fromUtf8(kReason));
    QSignalSpy finished(d, &BulkSettleDialog::finished);
    QVERIFY(d->start());
    QVERIFY(finished.wait(30000));
    QCOMPARE(d->results()->count(BulkResult::Kind::Settled), 3);
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'window-1'"),
             std::string("UNKNOWN"));
  }
};

QTEST_MAIN(TestBulkSettle)
#include "tst_bulk_settle.moc"

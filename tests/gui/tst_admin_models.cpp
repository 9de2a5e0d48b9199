// Every model of the admin app under QAbstractItemModelTester, fed by the real worker thread: the
// records table (with fetchMore), the needs-attention queue, and the evidence of a selected record
// (timeline, attempts, fund flows with duplicates highlighted; a reconciler's decision). Also the
// stuck counts, and the request API: superseded and orphaned replies are dropped, errors
// classified.
#include <QAbstractItemModelTester>
#include <QBrush>
#include <QSignalSpy>
#include <QtTest>
#include <atomic>
#include <memory>
#include <mutex>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/record_table_model.hpp"
#include "models/selected_record.hpp"
#include "models/settle_availability.hpp"
#include "models/status_palette.hpp"

using namespace idem;
using namespace idem::admin;

class TestAdminModels : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<DatabaseSession> session_;
  test::AdminScenario scenario_;

  // Waits for a marker request of its own: the worker runs requests in order and their replies
  // come back in order, so once the marker's is in, every earlier request has ended.
  // Submits `statements` in a transaction and waits for the request's error; empty when it
  // replied instead.
  template <typename Statements>
  std::optional<RequestError> failureOf(const char* what, Statements statements) {
    QObject requester;
    RequestTracker tracker(&requester);
    std::optional<RequestError> error;
    bool replied = false;
    session_->submit(
        tracker, what,
        [statements](pqxx::connection& c) {
          pqxx::work tx(c);
          statements(tx);
          return true;
        },
        [&](bool) { replied = true; }, [&](const RequestError& e) { error = e; });
    if (!QTest::qWaitFor([&] { return replied || error.has_value(); }, 15000)) return {};
    return error;
  }

  bool awaitEarlierRequests() {
    QObject marker;
    RequestTracker tracker(&marker);
    bool done = false;
    session_->submit(
        tracker, "marker", [](pqxx::connection&) { return true; }, [&](bool) { done = true; });
    return QTest::qWaitFor([&] { return done; }, 15000);
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_admin_models");
    auto c = db_->connect();
    scenario_ = test::seedScenario(*c);
    // Bulk rows so the table needs several pages.
    test::insertBulkRecords(*db_, {"bulk-", "coupon", "issue", "SUCCESS", 57});
    session_ = test::connectedSession(db_->dsn());
    QVERIFY(session_->isConnected());
  }

  // The settle preview's state machine is the schema's: the connected session carries what
  // idem.transition_allowed answers, and a schema that answered otherwise is followed.
  void theSettleRulesAreTheDatabases() {
    OperatorMoves contract;
    for (RecordStatus from : {RecordStatus::Processing, RecordStatus::Unknown}) {
      contract.allow(from, RecordStatus::Success);
      contract.allow(from, RecordStatus::Failed);
    }
    contract.allow(RecordStatus::Failed, RecordStatus::Success);
    QVERIFY(session_->info().operatorMoves == contract);

    auto c = db_->connect();
    pqxx::work tx(*c);
    tx.exec(
        "CREATE OR REPLACE FUNCTION idem.transition_allowed(from_status text, to_status text, "
        "actor_kind text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT from_status = "
        "'UNKNOWN' AND to_status = 'SUCCESS' AND actor_kind = 'operator' $$");
    const OperatorMoves narrow = readOperatorMoves(tx);
    tx.abort();
    QVERIFY(narrow.allows(RecordStatus::Unknown, RecordStatus::Success));
    QVERIFY(!narrow.anyFrom(RecordStatus::Failed));
    Record failed;
    failed.idempotencyKey = "k";
    failed.status = RecordStatus::Failed;
    const Timestamp now{std::chrono::microseconds(1'700'000'000'000'000)};
    QVERIFY(settleAvailability(failed, now, contract).allowed);
    QVERIFY(!settleAvailability(failed, now, narrow).allowed);
  }

  void recordTablePassesTheTesterWhileFetchingMore() {
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPageSize(4);
    model.setFilter({});
    QTRY_VERIFY(model.rowCount() > 0);
    QVERIFY(test::loadEverything(model));
    QCOMPARE(model.rowCount(), static_cast<int>(db_->scalar("SELECT count(*) FROM idem.records")));
    QCOMPARE(test::keysOf(model), test::keysBySql(*db_,
                                                  "SELECT idempotency_key FROM idem.records ORDER "
                                                  "BY updated_at DESC, idempotency_key DESC"));
    model.refresh();
    QTRY_VERIFY(!model.isLoading());
    model.touchAges();
  }

  void attentionQueueIsStuckRecordsOldestFirst() {
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPageSize(2);
    model.setFilter(RecordFilter::attention());
    QVERIFY(test::loadEverything(model));
    const auto keys = test::keysOf(model);
    QCOMPARE(keys,
             test::keysBySql(*db_,
                             "SELECT idempotency_key FROM idem.records WHERE status = 'UNKNOWN' "
                             "OR (status = 'PROCESSING' AND lease_expires_at < now()) "
                             "ORDER BY updated_at, idempotency_key"));
    QCOMPARE(keys.size(), std::size_t(4));
    QVERIFY(std::find(keys.begin(), keys.end(), scenario_.processingExpired) != keys.end());
    QVERIFY(std::find(keys.begin(), keys.end(), scenario_.processingFresh) == keys.end());
    for (int r = 0; r < model.rowCount(); ++r) {
      QVERIFY(model.index(r, RecordTableModel::Status).data(RecordTableModel::StuckRole).toBool());
    }
  }

  void statusesAreColourCodedAndAgesReadable() {
    RecordTableModel model(session_.get());
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    RecordFilter f;
    f.bizType = "payment";
    model.setFilter(f);
    QVERIFY(test::loadEverything(model));
    for (int r = 0; r < model.rowCount(); ++r) {
      const QModelIndex status = model.index(r, RecordTableModel::Status);
      const auto s = static_cast<RecordStatus>(status.data(RecordTableModel::StatusRole).toInt());
      QCOMPARE(status.data(Qt::DisplayRole).toString().toStdString(), std::string(format(s)));
      QCOMPARE(status.data(Qt::BackgroundRole).value<QBrush>().color(), statusBackground(s));
      const QString age = model.index(r, RecordTableModel::Age).data().toString();
      QVERIFY2(age.endsWith(QStringLiteral(" s")) || age.endsWith(QStringLiteral("min")),
               qPrintable(age));
      QVERIFY(model.index(r, RecordTableModel::Updated)
                  .data(RecordTableModel::ExportRole)
                  .toString()
                  .endsWith(QLatin1Char('Z')));
    }
    QVERIFY(statusBackground(RecordStatus::Processing) != statusBackground(RecordStatus::Unknown));
    QVERIFY(statusBackground(RecordStatus::Success) != statusBackground(RecordStatus::Failed));
  }

  void selectedRecordFillsItsEvidence() {
    SelectedRecord selected(session_.get());
    QAbstractItemModelTester t1(selected.transitions(),
                                QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t2(selected.attempts(),
                                QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t3(selected.fundFlows(),
                                QAbstractItemModelTester::FailureReportingMode::QtTest);

    selected.select(scenario_.unknown);
    QTRY_VERIFY(selected.record().has_value());
    QCOMPARE(selected.record()->status, RecordStatus::Unknown);
    QVERIFY(selected.record()->requestPayload.has_value());
    QCOMPARE(selected.transitions()->rowCount(), 2);
    QCOMPARE(selected.transitions()->index(0, TransitionModel::From).data().toString(),
             QStringLiteral("(created)"));
    QCOMPARE(selected.transitions()->index(1, TransitionModel::To).data().toString(),
             QStringLiteral("UNKNOWN"));
    QCOMPARE(selected.transitions()->index(1, TransitionModel::Reason).data().toString(),
             QStringLiteral("response timeout after 5s"));
    QCOMPARE(selected.attempts()->rowCount(), 2);
    QCOMPARE(selected.attempts()->index(0, AttemptModel::Source).data().toString(),
             QStringLiteral("http"));
    QCOMPARE(selected.attempts()->index(0, AttemptModel::Outcome).data().toString(),
             QStringLiteral("in_progress"));
    QCOMPARE(selected.attempts()->index(1, AttemptModel::Agent).data().toString(),
             QStringLiteral("agent-7"));
    QCOMPARE(selected.attempts()->index(1, AttemptModel::Trace).data().toString(),
             QStringLiteral("trace-pay-unknown"));
    QCOMPARE(selected.fundFlows()->rowCount(), 0);

    selected.select(scenario_.unknownDoubleDebit);
    QCOMPARE(selected.transitions()->rowCount(),
             0);  // cleared at once, never the previous record's
    QTRY_VERIFY(selected.record().has_value());
    QCOMPARE(selected.fundFlows()->rowCount(), 2);
    QCOMPARE(selected.fundFlows()->duplicateCount(), 1);
    QVERIFY(!selected.fundFlows()->index(0, 0).data(FundFlowModel::IsDuplicateRole).toBool());
    QVERIFY(selected.fundFlows()->index(1, 0).data(FundFlowModel::IsDuplicateRole).toBool());
    QCOMPARE(selected.fundFlows()
                 ->index(1, FundFlowModel::Kind)
                 .data(Qt::BackgroundRole)
                 .value<QBrush>()
                 .color(),
             duplicateFlowBackground());
    QVERIFY(!selected.fundFlows()->index(0, 0).data(Qt::BackgroundRole).isValid());
    QCOMPARE(selected.fundFlows()->index(0, FundFlowModel::Amount).data().toString(),
             QStringLiteral("29.90 CNY"));

    selected.refresh();  // same record again: rows kept in place
    QTRY_VERIFY(!selected.isLoading());
    QCOMPARE(selected.fundFlows()->rowCount(), 2);

    selected.select("no-such-key");
    QTRY_VERIFY(selected.isMissing());
    selected.select("");
    QCOMPARE(selected.fundFlows()->rowCount(), 0);
  }

  void aLateAnswerForThePreviousSelectionIsDropped() {
    SelectedRecord selected(session_.get());
    QSignalSpy ended(session_.get(), &DatabaseSession::requestEnded);
    selected.select(scenario_.unknownDoubleDebit);
    selected.select(scenario_.success);
    // Both requests are answered or skipped as stale by the worker; only the second one shows.
    QTRY_COMPARE(ended.count(), 2);
    QVERIFY(selected.record().has_value());
    QCOMPARE(selected.record()->idempotencyKey, scenario_.success);
    QCOMPARE(selected.fundFlows()->rowCount(), 1);
  }

  void countsComeFromTheUnsettledIndex() {
    QObject requester;
    RequestTracker tracker(&requester);
    std::optional<UnsettledCounts> counts;
    session_->submit(tracker, "count stuck records", readCounts,
                     [&](const UnsettledCounts& c) { counts = c; });
    QTRY_VERIFY(counts.has_value());
    QVERIFY(!tracker.isRunning());
    QCOMPARE(counts->processing, 2);
    QCOMPARE(counts->processingPastLease, 1);
    QCOMPARE(counts->unknown, 3);
  }

  void aSupersededReplyIsDropped() {
    QObject requester;
    RequestTracker tracker(&requester);
    std::vector<int> replies;
    auto started = std::make_shared<std::atomic<bool>>(false);
    const auto select = [started](int n) {
      return [n, started](pqxx::connection& c) {
        started->store(true);
        pqxx::nontransaction tx(c);
        if (n == 1) tx.exec("SELECT pg_sleep(0.2)");
        return tx.exec_params("SELECT $1::int", n)[0][0].as<int>();
      };
    };
    session_->submit(tracker, "first", select(1), [&](int n) { replies.push_back(n); });
    // Asked again while the first one runs: the first reply comes back, and is dropped.
    QVERIFY(QTest::qWaitFor([&] { return started->load(); }, 15000));
    session_->submit(tracker, "second", select(2), [&](int n) { replies.push_back(n); });
    QVERIFY(tracker.isRunning());
    QVERIFY(awaitEarlierRequests());
    QCOMPARE(replies, std::vector<int>{2});
    QVERIFY(!tracker.isRunning());
  }

  void aSupersededRequestIsNotRun() {
    QObject requester;
    RequestTracker tracker(&requester);
    std::vector<int> ran;
    std::mutex m;
    const auto note = [&](int n) {
      return [&, n](pqxx::connection&) {
        const std::lock_guard lock(m);
        ran.push_back(n);
        return n;
      };
    };
    // The worker is busy, so both wait in its queue; the first is superseded before it starts.
    QObject sleeper;
    RequestTracker sleeping(&sleeper);
    session_->submit(
        sleeping, "sleep",
        [](pqxx::connection& c) {
          pqxx::nontransaction(c).exec("SELECT pg_sleep(0.2)");
          return 0;
        },
        [](int) {});
    session_->submit(tracker, "first", note(1), [](int) {});
    session_->submit(tracker, "second", note(2), [](int) {});
    QVERIFY(awaitEarlierRequests());
    const std::lock_guard lock(m);
    QCOMPARE(ran, std::vector<int>{2});
  }

  void aReplyToADestroyedRequesterIsNotDelivered() {
    auto requester = std::make_unique<QObject>();
    RequestTracker tracker(requester.get());
    bool delivered = false;
    bool failed = false;
    QSignalSpy ended(session_.get(), &DatabaseSession::requestEnded);
    QObject* gone = requester.get();
    session_->submit(
        tracker, "sleep",
        [](pqxx::connection& c) {
          pqxx::nontransaction tx(c);
          tx.exec("SELECT pg_sleep(0.2)");
          return 1;
        },
        [&, gone](int) {
          gone->setObjectName(QStringLiteral("touched after its death"));
          delivered = true;
        },
        [&](const RequestError&) { failed = true; });
    requester.reset();  // while the worker sleeps
    QVERIFY(awaitEarlierRequests());
    QVERIFY(!delivered);
    QVERIFY(!failed);
    QCOMPARE(ended.count(), 2);  // the orphan and the marker
    QCOMPARE(ended.at(0).at(0).toBool(), false);
  }

  void anErrorReplyCarriesItsKind() {
    const std::optional<RequestError> cancelled = failureOf("wait too long", [](pqxx::work& tx) {
      tx.exec("SET LOCAL statement_timeout = 50");
      tx.exec("SELECT pg_sleep(2)");
    });
    QVERIFY(cancelled.has_value());
    QCOMPARE(cancelled->kind(), DatabaseErrorKind::QueryCancelled);
    QVERIFY(!cancelled->endsSession());
    QVERIFY2(
        QString::fromStdString(cancelled->what()).startsWith(QStringLiteral("wait too long: ")),
        cancelled->what());

    const std::optional<RequestError> refused = failureOf("insert twice", [](pqxx::work& tx) {
      tx.exec("CREATE TEMP TABLE once (x int PRIMARY KEY)");
      tx.exec("INSERT INTO once VALUES (1), (1)");
    });
    QVERIFY(refused.has_value());
    QCOMPARE(refused->kind(), DatabaseErrorKind::Constraint);
    QCOMPARE(refused->sqlstate(), std::string("23505"));
    QVERIFY(session_->isConnected());  // neither error ends the session
  }

  // Last: it adds a record of its own (resolved, so no count above changes).
  void theReconcilersDecisionReadsInTheTimeline() {
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    const Claim c = test::claim(client, test::paymentRequest("pay-resolved", "ord-resolved"));
    QVERIFY(client.markUnknown(c.key, c.version, "gateway timeout", c.token).ok());
    const ChangeResult resolved =
        client.resolve(c.key, c.version + 1, RecordStatus::Success, "gateway lookup: captured",
                       R"({"lookup": "gw-lookup-9", "state": "captured"})");
    QVERIFY(resolved.ok());

    SelectedRecord selected(session_.get());
    QAbstractItemModelTester t(selected.transitions(),
                               QAbstractItemModelTester::FailureReportingMode::QtTest);
    selected.select(c.key);
    QTRY_VERIFY(selected.record().has_value());
    QCOMPARE(selected.record()->status, RecordStatus::Success);
    TransitionModel* timeline = selected.transitions();
    QCOMPARE(timeline->rowCount(), 3);
    const QModelIndex kind = timeline->index(2, TransitionModel::ActorKind);
    QCOMPARE(kind.data().toString(), QStringLiteral("reconciler"));
    QCOMPARE(kind.data(Qt::ForegroundRole).value<QBrush>().color(),
             actorKindForeground(ActorKind::Reconciler));
    QVERIFY(!kind.data(TransitionModel::IsOperatorRole).toBool());
    QVERIFY(timeline->index(2, TransitionModel::Evidence)
                .data()
                .toString()
                .contains(QStringLiteral("gw-lookup-9")));
  }
};

QTEST_MAIN(TestAdminModels)
#include "tst_admin_models.moc"

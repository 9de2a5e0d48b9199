// The real window and dialogs, driven as an operator would: select a stuck record, open Settle,
// try a blank reason (refused, nothing sent), settle, and find the decision and its author in the
// database. Two operators on one record: the second is refused and sees the winner. FAILED with a
// DEBIT on record is blocked until the override is ticked, also when the DEBIT arrives after the
// dialog looked. Read-only roles cannot settle. Refresh keeps selection and scroll position;
// filters treat typed text as data; CSV export; shortcuts; the status bar.
#include <QAbstractItemModelTester>
#include <QBuffer>
#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "models/selected_record.hpp"
#include "widgets/connection_dialog.hpp"
#include "widgets/main_window.hpp"
#include "widgets/record_detail_view.hpp"
#include "widgets/record_filter_bar.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/settle_dialog.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

template <typename T>
T* child(QWidget* parent, const char* name) {
  T* found = parent->findChild<T*>(QString::fromLatin1(name));
  if (found == nullptr) qFatal("no child %s", name);
  return found;
}

void fillDecision(SettleDialog* d, RecordStatus to, const QString& reason) {
  d->chooseTarget(to);
  child<QPlainTextEdit>(d, "settleReason")->setPlainText(reason);
}

void clickSettle(SettleDialog* d) {
  QTest::mouseClick(child<QPushButton>(d, "settleButton"), Qt::LeftButton);
}

}  // namespace

class TestAdminWindow : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  test::AdminScenario s_;
  std::string alice_;
  std::string bob_;
  std::string carol_;  // idem_reader only

  std::unique_ptr<MainWindow> openWindow(const std::string& role,
                                         std::chrono::milliseconds refresh = std::chrono::hours(1)) {
    MainWindow::Options o;
    o.refreshInterval = refresh;
    o.pageSize = 50;
    o.backoff = ReconnectBackoff(200ms, 1s);
    auto w = std::make_unique<MainWindow>(o);
    w->connectTo(test::settingsFor(db_->dsnAs(role)));
    w->show();
    return w;
  }

  // Connected, and the first answers are in.
  static bool ready(MainWindow& w) {
    return test::waitUntil([&] {
      return w.session()->isConnected() && !w.recordsModel()->isLoading() &&
             !w.attentionModel()->isLoading() && w.attentionModel()->rowCount() > 0;
    });
  }

  static bool selectStuck(MainWindow& w, const std::string& key) {
    w.showAttention();
    if (!w.selectRecord(QString::fromStdString(key))) return false;
    return test::waitUntil([&] {
      return w.selectedRecord()->record() && w.selectedRecord()->record()->idempotencyKey == key &&
             w.settleAction()->isEnabled();
    });
  }

  std::string status(const std::string& key) {
    return test::textBySql(*db_, "SELECT status || ' v' || version FROM idem.records WHERE idempotency_key = '" + key + "'");
  }
  long long operatorDecisions(const std::string& key) {
    return db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator' AND idempotency_key = '" + key + "'");
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_admin_window"); }

  void init() {
    db_->reset();
    auto c = db_->connect();
    s_ = test::seedScenario(*c);
    alice_ = db_->createLoginRole("alice", "idem_operator");
    bob_ = db_->createLoginRole("bob", "idem_operator");
    carol_ = db_->createLoginRole("carol", "idem_reader");
  }

  void settleStuckRecordThroughTheDialog() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(QTest::qWaitForWindowActive(w.get()));
    QVERIFY(selectStuck(*w, s_.unknown));
    QCOMPARE(w->detailView()->fieldText(QStringLiteral("version")), QStringLiteral("2"));

    QTest::keyClick(w.get(), Qt::Key_S, Qt::ControlModifier);
    QTRY_VERIFY(w->settleDialog() != nullptr);
    SettleDialog* d = w->settleDialog();
    QCOMPARE(d->seen().version, 2);

    fillDecision(d, RecordStatus::Failed, QStringLiteral("   \n  "));
    clickSettle(d);
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QVERIFY2(d->message().contains(QStringLiteral("reason is required")), qPrintable(d->message()));
    QCOMPARE(status(s_.unknown), std::string("UNKNOWN v2"));

    child<QPlainTextEdit>(d, "settleReason")->setPlainText(QStringLiteral("gateway shows no capture for ord-unknown"));
    child<QLineEdit>(d, "settleGatewayRef")->setText(QStringLiteral("gw-lookup-42"));
    child<QPlainTextEdit>(d, "settleEvidenceJson")->setPlainText(QStringLiteral(R"({"ticket": "OPS-311"})"));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);  // accepted and closed

    QCOMPARE(status(s_.unknown), std::string("FAILED v3"));
    const std::string last = "SELECT %s FROM idem.transitions WHERE idempotency_key = 'pay-unknown' ORDER BY id DESC LIMIT 1";
    auto column = [&](const char* c) {
      std::string sql = last;
      sql.replace(sql.find("%s"), 2, c);
      return test::textBySql(*db_, sql);
    };
    QCOMPARE(column("actor"), alice_);
    QCOMPARE(column("actor_kind"), std::string("operator"));
    QCOMPARE(column("from_status || '>' || to_status || ' v' || version"), std::string("UNKNOWN>FAILED v3"));
    QCOMPARE(column("reason"), std::string("gateway shows no capture for ord-unknown"));
    QCOMPARE(column("evidence->>'gateway_ref'"), std::string("gw-lookup-42"));
    QCOMPARE(column("evidence->>'ticket'"), std::string("OPS-311"));

    // The window re-reads: the record leaves the queue, its timeline shows the decision.
    QTRY_COMPARE(w->attentionModel()->rowOfKey(s_.unknown), -1);
    QTRY_COMPARE(w->selectedRecord()->transitions()->rowCount(), 3);
    QCOMPARE(w->selectedRecord()->transitions()->index(2, TransitionModel::Actor).data().toString(),
             QString::fromStdString(alice_));
  }

  void secondOperatorIsRefusedAndSeesTheWinner() {
    auto a = openWindow(alice_);
    auto b = openWindow(bob_);
    QVERIFY(ready(*a));
    QVERIFY(ready(*b));
    QVERIFY(selectStuck(*a, s_.unknown));
    QVERIFY(selectStuck(*b, s_.unknown));
    SettleDialog* da = a->openSettleDialog();
    SettleDialog* db = b->openSettleDialog();
    QVERIFY(da && db);
    QCOMPARE(db->seen().version, 2);

    fillDecision(da, RecordStatus::Success, QStringLiteral("gateway statement line 1841: captured"));
    clickSettle(da);
    QTRY_VERIFY(a->settleDialog() == nullptr);
    QCOMPARE(status(s_.unknown), std::string("SUCCESS v3"));

    fillDecision(db, RecordStatus::Failed, QStringLiteral("customer says the payment failed"));
    clickSettle(db);
    QTRY_COMPARE(db->phase(), SettleDialog::Phase::Conflict);
    QVERIFY(db->outcome().has_value());
    QCOMPARE(db->outcome()->verdict, SettleVerdict::Conflict);
    QVERIFY2(db->message().contains(QString::fromStdString(alice_)), qPrintable(db->message()));
    QVERIFY(db->message().contains(QStringLiteral("nothing was written")));
    TransitionModel* changes = db->conflictModel();
    QAbstractItemModelTester tester(changes, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(changes->rowCount(), 1);
    QCOMPARE(changes->index(0, TransitionModel::Actor).data().toString(), QString::fromStdString(alice_));
    QCOMPARE(changes->index(0, TransitionModel::To).data().toString(), QStringLiteral("SUCCESS"));
    QCOMPARE(changes->index(0, TransitionModel::ActorKind).data().toString(), QStringLiteral("operator"));
    QVERIFY(!child<QPushButton>(db, "settleButton")->isEnabled());

    QCOMPARE(status(s_.unknown), std::string("SUCCESS v3"));
    QCOMPARE(operatorDecisions(s_.unknown), 1LL);
    // Bob's window re-reads the record: it now shows Alice's decision and can no longer be settled.
    QTRY_VERIFY(b->selectedRecord()->record() && b->selectedRecord()->record()->status == RecordStatus::Success);
    QTRY_VERIFY(!b->settleAction()->isEnabled());
  }

  void failedWithADebitIsBlockedWithoutTheOverride() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectStuck(*w, s_.unknownWithDebit));
    SettleDialog* d = w->openSettleDialog();
    QVERIFY(d);
    fillDecision(d, RecordStatus::Failed, QStringLiteral("gateway says declined"));
    QTRY_VERIFY(d->overrideOffered());
    QVERIFY2(d->warnings().contains(QStringLiteral("DEBIT")), qPrintable(d->warnings()));
    QVERIFY(d->warnings().contains(QStringLiteral("charge the customer again")));

    clickSettle(d);
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QVERIFY2(d->message().contains(QStringLiteral("override")), qPrintable(d->message()));
    QCOMPARE(status(s_.unknownWithDebit), std::string("UNKNOWN v2"));
    QCOMPARE(operatorDecisions(s_.unknownWithDebit), 0LL);

    child<QCheckBox>(d, "settleOverride")->setChecked(true);
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status(s_.unknownWithDebit), std::string("FAILED v3"));
    QCOMPARE(operatorDecisions(s_.unknownWithDebit), 1LL);
  }

  void aDebitRecordedAfterTheDialogLookedStillBlocks() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectStuck(*w, s_.unknown));
    SettleDialog* d = w->openSettleDialog();
    QVERIFY(d);
    QSignalSpy assessed(w->session(), &DatabaseSession::assessed);
    fillDecision(d, RecordStatus::Failed, QStringLiteral("looks declined"));
    QTRY_COMPARE(assessed.count(), 1);
    QVERIFY(!d->overrideOffered());

    // The gateway's callback lands while the operator types: the shared settle path re-checks.
    auto owner = db_->connect();
    ProtocolClient(*owner).recordFundFlow({"payment", "ord-unknown", FundFlowKind::Debit, 2990, "CNY", "gw-late-1", s_.unknown});
    clickSettle(d);
    QTRY_VERIFY(d->overrideOffered());
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QCOMPARE(d->outcome()->verdict, SettleVerdict::NeedsOverride);
    QCOMPARE(status(s_.unknown), std::string("UNKNOWN v2"));
  }

  void successWithoutAnyFlowSaysSo() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectStuck(*w, s_.processingExpired));
    SettleDialog* d = w->openSettleDialog();
    QVERIFY(d);
    d->chooseTarget(RecordStatus::Success);
    QTRY_VERIFY(!d->warnings().isEmpty());
    QVERIFY2(d->warnings().contains(QStringLiteral("no DEBIT flow")), qPrintable(d->warnings()));
    QVERIFY(!d->overrideOffered());  // a warning, not a block
    d->reject();
  }

  void readOnlyRoleCannotSettle() {
    auto w = openWindow(carol_);
    QVERIFY(ready(*w));
    QVERIFY(w->isReadOnly());
    w->showAttention();
    QVERIFY(w->selectRecord(QString::fromStdString(s_.unknown)));
    QTRY_VERIFY(w->selectedRecord()->record().has_value());
    QVERIFY(!w->settleAction()->isEnabled());
    QVERIFY2(w->settleAction()->toolTip().contains(QStringLiteral("idem_operator")),
             qPrintable(w->settleAction()->toolTip()));
    QVERIFY(w->openSettleDialog() == nullptr);
    QVERIFY(w->connectionStatusText().contains(QStringLiteral("read-only")));
    QVERIFY(child<QLabel>(w.get(), "readOnlyStatus")->isVisible());
  }

  void refreshKeepsSelectionAndScrollPosition() {
    test::execWithoutRecordTriggers(*db_, R"SQL(
      INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, created_at, updated_at)
      SELECT 'old-' || lpad(g::text, 3, '0'), 'coupon', 'cp-' || g, 'issue', 'h', 'SUCCESS',
             now() - g * interval '1 minute', now() - g * interval '1 minute'
      FROM generate_series(1, 300) AS g)SQL");
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    RecordTableModel* model = w->recordsModel();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    RecordTableView* view = w->recordsView();
    w->showRecords();
    while (model->rowCount() < 200) {
      view->verticalScrollBar()->setValue(view->verticalScrollBar()->maximum());  // the view fetches more
      QVERIFY(test::waitUntil([&] { return !model->isLoading(); }));
      if (!model->hasMore()) break;
    }
    QVERIFY(model->rowCount() >= 200);
    QVERIFY(w->selectRecord(QStringLiteral("old-120")));
    const int selectedRow = model->rowOfKey("old-120");
    view->scrollTo(model->index(selectedRow - 5, 0), QAbstractItemView::PositionAtTop);
    const QString topKey = view->indexAt(QPoint(0, 0)).data(RecordTableModel::KeyRole).toString();
    QTRY_COMPARE(w->selectedRecord()->key(), std::string("old-120"));

    // New records arrive above, one visible record changes.
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    for (int i = 0; i < 3; ++i) client.begin(test::paymentRequest("new-" + std::to_string(i), "ord-new-" + std::to_string(i)));
    QVERIFY(client.complete(s_.processingFresh, 1, "{}").ok());

    QSignalSpy resets(model, &QAbstractItemModel::modelReset);
    w->refreshNow();
    QVERIFY(test::waitUntil([&] { return model->rowOfKey("new-2") >= 0; }));
    QCOMPARE(model->recordAt(0)->idempotencyKey, s_.processingFresh);  // changed last: on top
    QCOMPARE(resets.count(), 0);
    QCOMPARE(view->currentIndex().data(RecordTableModel::KeyRole).toString(), QStringLiteral("old-120"));
    QCOMPARE(view->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(view->selectionModel()->selectedRows().first().data(RecordTableModel::KeyRole).toString(), QStringLiteral("old-120"));
    QCOMPARE(view->indexAt(QPoint(0, 0)).data(RecordTableModel::KeyRole).toString(), topKey);
    QCOMPARE(w->selectedRecord()->key(), std::string("old-120"));
  }

  void filterTextIsData() {
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    client.begin(test::paymentRequest("k,\"quoted\"", "o'br\\%_1"));
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    RecordFilterBar* bar = w->filterBar();
    RecordTableModel* model = w->recordsModel();
    const long long records = db_->scalar("SELECT count(*) FROM idem.records");

    const auto show = [&](QLineEdit* edit, const QString& text) {
      bar->clear();
      edit->setText(text);
      bar->applyNow();
      return test::waitUntil([&] { return !model->isLoading() && model->filter() == bar->filter(); });
    };
    QVERIFY(show(bar->keyEdit(), QStringLiteral("x' OR '1'='1")));
    QCOMPARE(model->rowCount(), 0);
    QVERIFY(show(bar->keyEdit(), QStringLiteral("'; DELETE FROM idem.records; --")));
    QCOMPARE(model->rowCount(), 0);
    QVERIFY(show(bar->keyEdit(), QStringLiteral("k,\"quoted\"")));
    QCOMPARE(model->rowCount(), 1);
    QVERIFY(show(bar->bizIdPrefixEdit(), QStringLiteral("o'br\\%")));
    QCOMPARE(model->rowCount(), 1);
    QVERIFY(show(bar->bizIdPrefixEdit(), QStringLiteral("o'br\\X")));  // '%' is not a wildcard
    QCOMPARE(model->rowCount(), 0);
    QVERIFY(show(bar->bizIdPrefixEdit(), QStringLiteral("%")));
    QCOMPARE(model->rowCount(), 0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), records);
  }

  void exportWritesTheVisibleRowsAsCsv() {
    auto owner = db_->connect();
    ProtocolClient(*owner).begin(test::paymentRequest("k,\"quoted\"", "ord-quoted"));
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    w->showRecords();
    QTRY_VERIFY(w->recordsModel()->rowCount() == db_->scalar("SELECT count(*) FROM idem.records"));
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QCOMPARE(w->exportCsv(buffer), w->recordsModel()->rowCount());
    const QString csv = QString::fromUtf8(buffer.data());
    const QStringList lines = csv.split(QStringLiteral("\r\n"), Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), w->recordsModel()->rowCount() + 1);
    QVERIFY(lines.first().startsWith(QStringLiteral("Status,Age,Idempotency key,Biz type")));
    QVERIFY(csv.contains(QStringLiteral(",\"k,\"\"quoted\"\"\",payment,ord-quoted,")));
    QVERIFY(csv.contains(QStringLiteral("Z,")));  // timestamps exported exactly, in UTC

    w->showAttention();
    QBuffer attention;
    attention.open(QIODevice::WriteOnly);
    QCOMPARE(w->exportCsv(attention), 4);
  }

  void shortcutsDriveTheWindow() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(QTest::qWaitForWindowActive(w.get()));
    w->recordsView()->setFocus();
    QSignalSpy pages(w->session(), &DatabaseSession::pageFetched);
    QTest::keyClick(w.get(), Qt::Key_F5);
    QTRY_VERIFY(pages.count() >= 2);  // records and attention re-read

    QVERIFY(!w->isPaused());
    QTest::keyClick(w->recordsView(), Qt::Key_Space);
    QVERIFY(w->isPaused());
    QVERIFY(child<QLabel>(w.get(), "refreshStatus")->text().contains(QStringLiteral("paused")));
    QTest::keyClick(w->recordsView(), Qt::Key_P);
    QVERIFY(!w->isPaused());

    QTest::keyClick(w.get(), Qt::Key_2, Qt::ControlModifier);
    QVERIFY(w->attentionShown());
    QTest::keyClick(w.get(), Qt::Key_F, Qt::ControlModifier);
    QVERIFY(!w->attentionShown());
    QCOMPARE(QApplication::focusWidget(), w->filterBar()->keyEdit());
    QCOMPARE(w->exportAction()->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_E));
    QCOMPARE(w->settleAction()->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_S));
    // Typing a space or a P into the filter is text, not a shortcut.
    QTest::keyClicks(w->filterBar()->keyEdit(), QStringLiteral("p p"));
    QCOMPARE(w->filterBar()->keyEdit()->text(), QStringLiteral("p p"));
    QVERIFY(!w->isPaused());
  }

  void autoRefreshFollowsTheDatabaseUntilPaused() {
    auto w = openWindow(alice_, 200ms);
    QVERIFY(ready(*w));
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    client.begin(test::paymentRequest("arrives-1", "ord-arrives-1"));
    QTRY_VERIFY(w->recordsModel()->rowOfKey("arrives-1") >= 0);
    w->setPaused(true);
    // A refresh that started before the pause may still land; after that, nothing.
    QTRY_VERIFY(!w->recordsModel()->isLoading() && !w->attentionModel()->isLoading());
    QSignalSpy pages(w->session(), &DatabaseSession::pageFetched);
    client.begin(test::paymentRequest("arrives-2", "ord-arrives-2"));
    QTest::qWait(800);  // four refresh intervals: nothing may be re-read while paused
    QCOMPARE(pages.count(), 0);
    QCOMPARE(w->recordsModel()->rowOfKey("arrives-2"), -1);
    w->setPaused(false);
    QTRY_VERIFY(w->recordsModel()->rowOfKey("arrives-2") >= 0);
  }

  void connectionDialogRemembersEverythingButThePassword() {
    QStandardPaths::setTestModeEnabled(true);  // QSettings under ~/.qttest, not the user's
    QSettings().clear();
    // Fills the modal dialog once it is up, then presses Connect.
    const auto answer = [](const std::function<void(ConnectionDialog*)>& fill) {
      auto* poll = new QTimer;
      QObject::connect(poll, &QTimer::timeout, poll, [poll, fill] {
        if (auto* d = qobject_cast<ConnectionDialog*>(QApplication::activeModalWidget())) {
          fill(d);
          d->accept();
          poll->deleteLater();
        }
      });
      poll->start(10);
    };
    answer([](ConnectionDialog* d) {
      child<QLineEdit>(d, "connectionHost")->setText(QStringLiteral("db.internal"));
      child<QLineEdit>(d, "connectionPort")->setText(QStringLiteral("6432"));
      child<QLineEdit>(d, "connectionDatabase")->setText(QStringLiteral("idem"));
      child<QLineEdit>(d, "connectionUser")->setText(QStringLiteral("alice"));
      child<QLineEdit>(d, "connectionPassword")->setText(QStringLiteral("s3cret"));
    });
    const auto first = ConnectionDialog::ask(nullptr);
    QVERIFY(first.has_value());
    QCOMPARE(QString::fromStdString(first->dsn),
             QStringLiteral("host='db.internal' port='6432' dbname='idem' user='alice' password='s3cret'"));
    QSettings settings;
    settings.sync();
    QFile stored(settings.fileName());
    QVERIFY(stored.open(QIODevice::ReadOnly));
    const QByteArray text = stored.readAll();
    QVERIFY(text.contains("db.internal"));
    QVERIFY2(!text.contains("s3cret"), text.constData());

    // Next time: the same fields, an empty password; a DSN with a password is stored without it.
    answer([](ConnectionDialog* d) {
      QCOMPARE(child<QLineEdit>(d, "connectionHost")->text(), QStringLiteral("db.internal"));
      QCOMPARE(child<QLineEdit>(d, "connectionPassword")->text(), QString());
      child<QRadioButton>(d, "connectionUseDsn")->setChecked(true);
      child<QLineEdit>(d, "connectionDsn")->setText(QStringLiteral("host=db2 user=bob password=hunter2"));
    });
    const auto second = ConnectionDialog::ask(nullptr);
    QVERIFY(second.has_value());
    QCOMPARE(second->dsn, std::string("host=db2 user=bob password=hunter2"));  // used, in memory
    QSettings again;
    QCOMPARE(again.value(QStringLiteral("connection/dsn")).toString(), QStringLiteral("host=db2 user=bob"));
    QVERIFY(again.value(QStringLiteral("connection/useDsn")).toBool());
  }

  void statusBarShowsRoleServerAndCounts() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    const QString status = w->connectionStatusText();
    QVERIFY2(status.contains(QString::fromStdString(alice_)) && status.contains(QStringLiteral("operator")) &&
                 status.contains(QStringLiteral("PostgreSQL")) && status.contains(QString::fromStdString(db_->name())),
             qPrintable(status));
    QTRY_VERIFY2(w->countsText().contains(QStringLiteral(">1</b> processing past lease")), qPrintable(w->countsText()));
    QVERIFY2(w->countsText().contains(QStringLiteral(">3</b> unknown")), qPrintable(w->countsText()));
    QVERIFY(child<QLabel>(w.get(), "loadedStatus")->text().contains(QStringLiteral("rows loaded")));
    QVERIFY(!child<QLabel>(w.get(), "readOnlyStatus")->isVisible());
  }
};

QTEST_MAIN(TestAdminWindow)
#include "tst_admin_window.moc"

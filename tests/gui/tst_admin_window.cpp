// The real window and dialogs, driven as an operator would: select a stuck record, open Settle,
// try a blank reason (refused, nothing sent), settle, and find the decision and its author in the
// database. Two operators on one record: the second is refused and sees the winner. Schema v2: a
// PROCESSING record whose lease is live cannot be settled (the action says until when) and can be
// once the lease ends, without a new selection; a FAILED record is offered only the correction to
// SUCCESS; FAILED while money moved is refused by the server (money_moved, nothing written) unless
// the explicit override is ticked, which the transition's evidence records, also when the DEBIT
// arrives after the dialog looked; the server's refusals are shown as it words them; retry_allowed
// reads in the detail. Read-only roles cannot settle. Refresh keeps selection and scroll position;
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
#include "models/timestamps.hpp"
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

  std::unique_ptr<MainWindow> openWindow(
      const std::string& role, std::chrono::milliseconds refresh = std::chrono::hours(1)) {
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

  // Opens the settle dialog on a stuck record, fills in a decision and waits for the database's
  // weighing of it; null when any step does not happen.
  static SettleDialog* decideOnStuck(MainWindow& w, const std::string& key, RecordStatus to,
                                     const QString& reason) {
    if (!ready(w) || !selectStuck(w, key)) return nullptr;
    SettleDialog* d = w.openSettleDialog();
    if (!d) return nullptr;
    QSignalSpy assessed(d, &SettleDialog::assessed);
    fillDecision(d, to, reason);
    return test::waitUntil([&] { return assessed.count() == 1; }) ? d : nullptr;
  }

  // Selects a record in the Records tab and waits for its detail.
  static bool selectAny(MainWindow& w, const std::string& key) {
    w.showRecords();
    if (!test::waitUntil([&] { return w.recordsModel()->rowOfKey(key) >= 0; })) return false;
    if (!w.selectRecord(QString::fromStdString(key))) return false;
    return test::waitUntil([&] {
      return w.selectedRecord()->record() && w.selectedRecord()->record()->idempotencyKey == key;
    });
  }

  std::string lastTransition(const std::string& key, const std::string& columns) {
    return test::textBySql(*db_, "SELECT " + columns +
                                     " FROM idem.transitions WHERE idempotency_key = '" + key +
                                     "' ORDER BY id DESC LIMIT 1");
  }

  std::string status(const std::string& key) {
    return test::textBySql(
        *db_,
        "SELECT status || ' v' || version FROM idem.records WHERE idempotency_key = '" + key + "'");
  }
  long long operatorDecisions(const std::string& key) {
    return db_->scalar(
        "SELECT count(*) FROM idem.transitions WHERE actor_kind = 'operator' AND idempotency_key = "
        "'" +
        key + "'");
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

    child<QPlainTextEdit>(d, "settleReason")
        ->setPlainText(QStringLiteral("gateway shows no capture for ord-unknown"));
    child<QLineEdit>(d, "settleGatewayRef")->setText(QStringLiteral("gw-lookup-42"));
    child<QPlainTextEdit>(d, "settleEvidenceJson")
        ->setPlainText(QStringLiteral(R"({"ticket": "OPS-311"})"));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);  // accepted and closed

    QCOMPARE(status(s_.unknown), std::string("FAILED v3"));
    const std::string last =
        "SELECT %s FROM idem.transitions WHERE idempotency_key = 'pay-unknown' ORDER BY id DESC "
        "LIMIT 1";
    auto column = [&](const char* c) {
      std::string sql = last;
      sql.replace(sql.find("%s"), 2, c);
      return test::textBySql(*db_, sql);
    };
    QCOMPARE(column("actor"), alice_);
    QCOMPARE(column("actor_kind"), std::string("operator"));
    QCOMPARE(column("from_status || '>' || to_status || ' v' || version"),
             std::string("UNKNOWN>FAILED v3"));
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

    fillDecision(da, RecordStatus::Success,
                 QStringLiteral("gateway statement line 1841: captured"));
    clickSettle(da);
    QTRY_VERIFY(a->settleDialog() == nullptr);
    QCOMPARE(status(s_.unknown), std::string("SUCCESS v3"));

    fillDecision(db, RecordStatus::Failed, QStringLiteral("customer says the payment failed"));
    clickSettle(db);
    QTRY_COMPARE(db->phase(), SettleDialog::Phase::Conflict);
    QVERIFY(db->outcome().has_value());
    QCOMPARE(db->outcome()->verdict, SettleVerdict(ResultCode::Conflict));
    QVERIFY2(db->message().contains(QString::fromStdString(alice_)), qPrintable(db->message()));
    QVERIFY(db->message().contains(QStringLiteral("nothing was written")));
    TransitionModel* changes = db->conflictModel();
    QAbstractItemModelTester tester(changes,
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(changes->rowCount(), 1);
    QCOMPARE(changes->index(0, TransitionModel::Actor).data().toString(),
             QString::fromStdString(alice_));
    QCOMPARE(changes->index(0, TransitionModel::To).data().toString(), QStringLiteral("SUCCESS"));
    QCOMPARE(changes->index(0, TransitionModel::ActorKind).data().toString(),
             QStringLiteral("operator"));
    QVERIFY(!child<QPushButton>(db, "settleButton")->isEnabled());

    QCOMPARE(status(s_.unknown), std::string("SUCCESS v3"));
    QCOMPARE(operatorDecisions(s_.unknown), 1LL);
    // Bob's window re-reads the record: it now shows Alice's decision and can no longer be settled.
    QTRY_VERIFY(b->selectedRecord()->record() &&
                b->selectedRecord()->record()->status == RecordStatus::Success);
    QTRY_VERIFY(!b->settleAction()->isEnabled());
  }

  void failedWhileMoneyMovedNeedsTheExplicitOverride() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectStuck(*w, s_.unknownWithDebit));
    SettleDialog* d = w->openSettleDialog();
    QVERIFY(d);
    QSignalSpy assessed(d, &SettleDialog::assessed);
    fillDecision(d, RecordStatus::Failed, QStringLiteral("gateway says declined"));
    QTRY_VERIFY(d->overrideOffered());
    QVERIFY2(d->warnings().contains(
                 QStringLiteral("the ledger records the side effect of payment/ord-debited")),
             qPrintable(d->warnings()));
    QVERIFY2(d->moneyPositionText().contains(QStringLiteral("Money moved")),
             qPrintable(d->moneyPositionText()));
    auto* override = child<QCheckBox>(d, "settleOverride");
    QVERIFY(override->text().contains(QStringLiteral("Override: money moved")));
    QVERIFY(!override->isChecked());

    // Without the override the server refuses: its words, nothing written.
    clickSettle(d);
    QTRY_VERIFY(d->outcome().has_value());
    QCOMPARE(d->outcome()->verdict, SettleVerdict(ResultCode::SideEffectRecorded));
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QCOMPARE(d->message(), QString::fromStdString(d->outcome()->message));
    QVERIFY2(d->message().contains(QStringLiteral("side_effect_recorded")),
             qPrintable(d->message()));
    QVERIFY(d->overrideOffered());
    QCOMPARE(status(s_.unknownWithDebit), std::string("UNKNOWN v2"));
    QCOMPARE(operatorDecisions(s_.unknownWithDebit), 0LL);

    // The override does not stand in for a reason.
    const int before = static_cast<int>(assessed.count());
    QTest::mouseClick(override, Qt::LeftButton, {}, QPoint(8, override->height() / 2));
    QVERIFY(override->isChecked());
    QTRY_VERIFY(assessed.count() > before);  // weighed again, as overridden
    QTRY_VERIFY2(d->warnings().contains(QStringLiteral("overridden")), qPrintable(d->warnings()));
    child<QPlainTextEdit>(d, "settleReason")->setPlainText(QStringLiteral(" \t\n "));
    clickSettle(d);
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QVERIFY2(d->message().contains(QStringLiteral("reason is required")), qPrintable(d->message()));
    QCOMPARE(operatorDecisions(s_.unknownWithDebit), 0LL);

    child<QPlainTextEdit>(d, "settleReason")
        ->setPlainText(QStringLiteral("gateway console: gw-debit-1 was voided before capture"));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status(s_.unknownWithDebit), std::string("FAILED v3"));
    QCOMPARE(operatorDecisions(s_.unknownWithDebit), 1LL);
    QCOMPARE(lastTransition(s_.unknownWithDebit, "actor || ' ' || actor_kind"),
             alice_ + " operator");
    QCOMPARE(lastTransition(s_.unknownWithDebit, "evidence ? 'override_money_moved'"),
             std::string("t"));
    QCOMPARE(lastTransition(s_.unknownWithDebit, "reason"),
             std::string("gateway console: gw-debit-1 was voided before capture"));
  }

  void holdsAloneAreNotMoneyMoved() {
    // A FREEZE is a hold: FAILED needs no override (NOTES, "what money moved counts").
    auto owner = db_->connect();
    ProtocolClient(*owner).recordFundFlow(
        {"payment", "ord-unknown", FundFlowKind::Freeze, 2990, "CNY", "gw-hold-1", s_.unknown});
    auto w = openWindow(alice_);
    SettleDialog* d = decideOnStuck(*w, s_.unknown, RecordStatus::Failed,
                                    QStringLiteral("the hold was released, no capture"));
    QVERIFY(d);
    QVERIFY(!d->overrideOffered());
    QVERIFY2(d->moneyPositionText().contains(QStringLiteral("No money moved")),
             qPrintable(d->moneyPositionText()));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status(s_.unknown), std::string("FAILED v3"));
  }

  // A coupon leaves no line in the ledger: the dialog says plainly that the ledger cannot tell,
  // offers no override (there is nothing to override), and FAILED is the operator's own word.
  void aSideEffectTheLedgerCannotTellIsTheOperatorsWord() {
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    BeginRequest r = test::paymentRequest("cpn-lost", "cpn-1");
    r.bizType = "coupon";
    r.tool = "issue_coupon";
    const Claim c = test::claim(client, r);
    QVERIFY(client.markUnknown("cpn-lost", c.version, "coupon service timeout", c.token).ok());
    auto w = openWindow(alice_);
    SettleDialog* d = decideOnStuck(*w, "cpn-lost", RecordStatus::Failed,
                                    QStringLiteral("the coupon system shows no coupon cpn-1"));
    QVERIFY(d);
    QVERIFY2(d->moneyPositionText().contains(QStringLiteral("The ledger cannot tell")),
             qPrintable(d->moneyPositionText()));
    QVERIFY2(d->warnings().contains(
                 QStringLiteral("the ledger cannot tell whether this coupon happened")),
             qPrintable(d->warnings()));
    QVERIFY(!d->overrideOffered());
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status("cpn-lost"), std::string("FAILED v3"));
  }

  void settleWaitsForALiveLeaseAndSaysUntilWhen() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectAny(*w, s_.processingFresh));
    QVERIFY(!w->settleAction()->isEnabled());
    const Record& r = *w->selectedRecord()->record();
    QVERIFY(r.leaseExpiresAt.has_value());
    const QString until = displayTime(*r.leaseExpiresAt);
    const QString tip = w->settleAction()->toolTip();
    QVERIFY2(tip.contains(QStringLiteral("lease")) && tip.contains(until) &&
                 tip.contains(QStringLiteral("claimant may still answer")),
             qPrintable(tip));
    QCOMPARE(w->detailView()->settleHint(), tip);  // beside the Settle button, not only a tooltip
    QVERIFY(w->openSettleDialog() == nullptr);
    QTest::keyClick(w.get(), Qt::Key_S, Qt::ControlModifier);
    QVERIFY(w->settleDialog() == nullptr);
  }

  void settleBecomesAvailableWhenTheLeaseEnds() {
    auto w = openWindow(alice_);  // auto-refresh every hour: only the lease timer can do it
    QVERIFY(ready(*w));
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    client.begin(test::paymentRequest("pay-short", "ord-short", 4s));
    w->refreshNow();
    QVERIFY(selectAny(*w, "pay-short"));
    QTRY_VERIFY(!w->recordsModel()->isLoading() && !w->attentionModel()->isLoading() &&
                !w->selectedRecord()->isLoading());
    QVERIFY(!w->settleAction()->isEnabled());
    QVERIFY(w->detailView()->settleHint().contains(QStringLiteral("lease")));
    QSignalSpy pages(w->recordsModel(), &RecordTableModel::fetched);
    QSignalSpy attentionPages(w->attentionModel(), &RecordTableModel::fetched);
    QSignalSpy evidence(w->selectedRecord(), &SelectedRecord::changed);

    QTRY_VERIFY_WITH_TIMEOUT(w->settleAction()->isEnabled(), 10000);
    QCOMPARE(pages.count() + attentionPages.count(), 0);  // nothing re-read,
    QCOMPARE(evidence.count(), 0);                        // nothing re-selected
    QCOMPARE(w->selectedRecord()->key(), std::string("pay-short"));
    QVERIFY(w->detailView()->settleHint().isEmpty());

    // And the server agrees: the lease has ended.
    SettleDialog* d = w->openSettleDialog();
    QVERIFY(d);
    fillDecision(d, RecordStatus::Failed, QStringLiteral("gateway has no attempt for ord-short"));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status("pay-short"), std::string("FAILED v2"));
  }

  void leaseActiveRefusalIsShownAsTheServerSaysIt() {
    // The window never offers this; a dialog opened just before a clock disagreement could.
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectAny(*w, s_.processingFresh));
    SettleDialog d(w->session(), *w->selectedRecord()->record(), {}, w.get());
    fillDecision(&d, RecordStatus::Failed, QStringLiteral("agent looks dead"));
    d.submit();
    QTRY_VERIFY(d.outcome().has_value());
    QCOMPARE(d.outcome()->verdict, SettleVerdict(ResultCode::LeaseActive));
    QCOMPARE(d.phase(), SettleDialog::Phase::Editing);
    QCOMPARE(d.message(), QString::fromStdString(d.outcome()->message));
    QVERIFY2(d.message().contains(QStringLiteral("lease_active")) &&
                 d.message().contains(QStringLiteral("nothing was written")),
             qPrintable(d.message()));
    QCOMPARE(status(s_.processingFresh), std::string("PROCESSING v1"));
    QCOMPARE(operatorDecisions(s_.processingFresh), 0LL);
  }

  void failedIsOfferedOnlyTheCorrectionToSuccess() {
    // The capture shows up on the gateway's statement after the agent reported FAILED.
    auto owner = db_->connect();
    ProtocolClient(*owner).recordFundFlow({"payment", "ord-failed", FundFlowKind::Capture, 2990,
                                           "CNY", "gw-late-capture", s_.failed});
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectAny(*w, s_.failed));
    QTRY_VERIFY(w->settleAction()->isEnabled());
    QVERIFY2(w->settleAction()->text().contains(QStringLiteral("Correct")),
             qPrintable(w->settleAction()->text()));
    QVERIFY2(w->settleAction()->toolTip().contains(QStringLiteral("happened after all")),
             qPrintable(w->settleAction()->toolTip()));

    QTest::keyClick(w.get(), Qt::Key_S, Qt::ControlModifier);
    QTRY_VERIFY(w->settleDialog() != nullptr);
    SettleDialog* d = w->settleDialog();
    QVERIFY(d->isCorrection());
    QVERIFY(d->offers(RecordStatus::Success));
    QVERIFY(!d->offers(RecordStatus::Failed));
    QVERIFY(child<QRadioButton>(d, "settleToSuccess")->isChecked());
    QVERIFY(
        child<QRadioButton>(d, "settleToSuccess")->text().contains(QStringLiteral("correction")));
    QVERIFY(d->windowTitle().startsWith(QStringLiteral("Correct")));
    d->chooseTarget(RecordStatus::Failed);  // not offered: nothing changes
    QVERIFY(child<QRadioButton>(d, "settleToSuccess")->isChecked());

    child<QPlainTextEdit>(d, "settleReason")
        ->setPlainText(QStringLiteral("statement line 77: gw-late-capture captured"));
    child<QLineEdit>(d, "settleGatewayRef")->setText(QStringLiteral("gw-late-capture"));
    clickSettle(d);
    QTRY_VERIFY(w->settleDialog() == nullptr);
    QCOMPARE(status(s_.failed), std::string("SUCCESS v3"));
    QCOMPARE(lastTransition(s_.failed, "from_status || '>' || to_status"),
             std::string("FAILED>SUCCESS"));
    QCOMPARE(lastTransition(s_.failed, "actor || ' ' || actor_kind"), alice_ + " operator");
    QCOMPARE(lastTransition(s_.failed, "reason"),
             std::string("statement line 77: gw-late-capture captured"));
    QCOMPARE(lastTransition(s_.failed, "evidence->>'gateway_ref'"), std::string("gw-late-capture"));
    // SUCCESS is final: nothing more to settle.
    QTRY_VERIFY(w->selectedRecord()->record() &&
                w->selectedRecord()->record()->status == RecordStatus::Success);
    QVERIFY(!w->settleAction()->isEnabled());
    QVERIFY(w->settleAction()->toolTip().contains(QStringLiteral("final")));
  }

  void retryAllowedReadsInTheDetail() {
    auto owner = db_->connect();
    ProtocolClient client(*owner);
    const Claim refused = test::claim(client, test::paymentRequest("pay-refused", "ord-refused"));
    QVERIFY(client
                .fail("pay-refused", refused.version, "connection refused before sending",
                      refused.token, /*retryAllowed=*/true)
                .ok());
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    QVERIFY(selectAny(*w, s_.failed));
    QVERIFY2(w->detailView()
                 ->fieldText(QStringLiteral("retry_allowed"))
                 .contains(QStringLiteral("final failure: a retry is replayed the error")),
             qPrintable(w->detailView()->fieldText(QStringLiteral("retry_allowed"))));
    QVERIFY(selectAny(*w, "pay-refused"));
    QVERIFY2(w->detailView()
                 ->fieldText(QStringLiteral("retry_allowed"))
                 .contains(QStringLiteral("may be retried")),
             qPrintable(w->detailView()->fieldText(QStringLiteral("retry_allowed"))));
    QVERIFY(selectAny(*w, s_.success));
    QCOMPARE(w->detailView()->fieldText(QStringLiteral("retry_allowed")), QStringLiteral("\u2014"));
  }

  void aDebitRecordedAfterTheDialogLookedStillBlocks() {
    auto w = openWindow(alice_);
    SettleDialog* d =
        decideOnStuck(*w, s_.unknown, RecordStatus::Failed, QStringLiteral("looks declined"));
    QVERIFY(d);
    QVERIFY(!d->overrideOffered());

    // The gateway's callback lands while the operator types: the shared settle path re-checks.
    auto owner = db_->connect();
    ProtocolClient(*owner).recordFundFlow(
        {"payment", "ord-unknown", FundFlowKind::Debit, 2990, "CNY", "gw-late-1", s_.unknown});
    clickSettle(d);
    QTRY_VERIFY(d->overrideOffered());
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QCOMPARE(d->outcome()->verdict, SettleVerdict(ResultCode::SideEffectRecorded));
    QCOMPARE(d->message(), QString::fromStdString(d->outcome()->message));
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
    QVERIFY2(d->warnings().contains(
                 QStringLiteral("no DEBIT or CAPTURE flow for payment/ord-expired shows")),
             qPrintable(d->warnings()));
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
    test::insertBulkRecords(*db_, {"old-", "coupon", "issue", "SUCCESS", 300, "1 minute", 3});
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    RecordTableModel* model = w->recordsModel();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    RecordTableView* view = w->recordsView();
    w->showRecords();
    while (model->rowCount() < 200) {
      // Laid out first: until the view has placed the rows it got, its scroll range does not
      // grow, scrolling to the end changes nothing and nothing more is fetched (a spin).
      QCoreApplication::processEvents();
      view->verticalScrollBar()->setValue(
          view->verticalScrollBar()->maximum());  // the view fetches more
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
    for (int i = 0; i < 3; ++i)
      client.begin(
          test::paymentRequest("new-" + std::to_string(i), "ord-new-" + std::to_string(i)));
    QVERIFY(client.complete(s_.processingFresh, 1, "{}", s_.freshToken).ok());

    QSignalSpy resets(model, &QAbstractItemModel::modelReset);
    w->refreshNow();
    QVERIFY(test::waitUntil([&] { return model->rowOfKey("new-2") >= 0; }));
    QCOMPARE(model->recordAt(0)->idempotencyKey, s_.processingFresh);  // changed last: on top
    QCOMPARE(resets.count(), 0);
    QCOMPARE(view->currentIndex().data(RecordTableModel::KeyRole).toString(),
             QStringLiteral("old-120"));
    QCOMPARE(view->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(
        view->selectionModel()->selectedRows().first().data(RecordTableModel::KeyRole).toString(),
        QStringLiteral("old-120"));
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
      return test::waitUntil(
          [&] { return !model->isLoading() && model->filter() == bar->filter(); });
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
    QSignalSpy pages(w->recordsModel(), &RecordTableModel::fetched);
    QSignalSpy attentionPages(w->attentionModel(), &RecordTableModel::fetched);
    QTest::keyClick(w.get(), Qt::Key_F5);
    QTRY_VERIFY(pages.count() >= 1 &&
                attentionPages.count() >= 1);  // records and attention re-read

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
    QSignalSpy pages(w->recordsModel(), &RecordTableModel::fetched);
    QSignalSpy attentionPages(w->attentionModel(), &RecordTableModel::fetched);
    client.begin(test::paymentRequest("arrives-2", "ord-arrives-2"));
    QTest::qWait(800);  // four refresh intervals: nothing may be re-read while paused
    QCOMPARE(pages.count() + attentionPages.count(), 0);
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
             QStringLiteral(
                 "host='db.internal' port='6432' dbname='idem' user='alice' password='s3cret'"));
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
      child<QLineEdit>(d, "connectionDsn")
          ->setText(QStringLiteral("host=db2 user=bob password=hunter2"));
    });
    const auto second = ConnectionDialog::ask(nullptr);
    QVERIFY(second.has_value());
    QCOMPARE(second->dsn, std::string("host=db2 user=bob password=hunter2"));  // used, in memory
    QSettings again;
    QCOMPARE(again.value(QStringLiteral("connection/dsn")).toString(),
             QStringLiteral("host=db2 user=bob"));
    QVERIFY(again.value(QStringLiteral("connection/useDsn")).toBool());
  }

  void statusBarShowsRoleServerAndCounts() {
    auto w = openWindow(alice_);
    QVERIFY(ready(*w));
    const QString status = w->connectionStatusText();
    QVERIFY2(status.contains(QString::fromStdString(alice_)) &&
                 status.contains(QStringLiteral("operator")) &&
                 status.contains(QStringLiteral("PostgreSQL")) &&
                 status.contains(QString::fromStdString(db_->name())),
             qPrintable(status));
    QTRY_VERIFY2(w->countsText().contains(QStringLiteral(">1</b> processing past lease")),
                 qPrintable(w->countsText()));
    QVERIFY2(w->countsText().contains(QStringLiteral(">3</b> unknown")),
             qPrintable(w->countsText()));
    QVERIFY(child<QLabel>(w.get(), "loadedStatus")->text().contains(QStringLiteral("rows loaded")));
    QVERIFY(!child<QLabel>(w.get(), "readOnlyStatus")->isVisible());
  }
};

QTEST_MAIN(TestAdminWindow)
#include "tst_admin_window.moc"

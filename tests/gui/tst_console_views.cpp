// The operators' money views, through the real window against a real PostgreSQL:
// the Reconciliation tab's rows are the money questions' rows (idem.money_moved_without_success,
// idem.success_without_money_moved) and settle a charged UNKNOWN record SUCCESS with the charge
// filled in as evidence (a reason still required; the history names the operator and the reason),
// a FAILED one is offered the correction; the Overcharges tab's rows are idem.overcharged_objects'
// and empty once a REFUND is recorded; the Trace audit tells an incident's whole story in order
// (first try, lease expiry, an LLM retry under a new key, a callback re-drive, the charge). Every
// new model runs under QAbstractItemModelTester. Copy puts a cell's whole text on the clipboard;
// the window title follows the records filter; each tab says when it was last refreshed.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QBuffer>
#include <QClipboard>
#include <QComboBox>
#include <QGuiApplication>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTreeView>
#include <QtTest>

#include "admin_fixture.hpp"
#include "models/business_object.hpp"
#include "models/database_session.hpp"
#include "models/overcharge_model.hpp"
#include "models/reconciliation_model.hpp"
#include "models/record_table_model.hpp"
#include "models/status_palette.hpp"
#include "models/trace_story_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/overcharges_view.hpp"
#include "widgets/reconciliation_view.hpp"
#include "widgets/record_filter_bar.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/settle_dialog.hpp"
#include "widgets/table_copy.hpp"
#include "widgets/trace_audit_view.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

// What the functions return for every biz type, over 24 h with no grace: the test's data is new.
constexpr const char* kMovedSql =
    "SELECT biz_type || '/' || biz_id || ' ' || coalesce(record_key, '-') || ' ' || "
    "coalesce(record_status, '-') || ' ' || charged_minor || ' ' || currency FROM "
    "idem.money_moved_without_success(ARRAY['payment'], '24 hours', '0 seconds')";
constexpr const char* kSuccessSql =
    "SELECT biz_type || '/' || biz_id || ' ' || idempotency_key || ' SUCCESS' FROM "
    "idem.success_without_money_moved(ARRAY['payment'], '24 hours', '0 seconds')";
constexpr const char* kOverchargedSql =
    "SELECT biz_type || '/' || biz_id || ' ' || owed_minor || ' ' || currency || ' ' || "
    "array_to_string(idempotency_keys, ',') FROM idem.overcharged_objects(ARRAY['payment'], "
    "'24 hours')";

std::vector<std::string> reconciliationLines(const ReconciliationModel& m) {
  std::vector<std::string> lines;
  for (const ReconciliationRow& r : m.rows()) {
    std::string line = r.bizType + "/" + r.bizId + " " + r.recordKey.value_or("-") + " " +
                       (r.recordStatus ? std::string(format(*r.recordStatus)) : "-");
    if (r.question == MoneyQuestion::MovedWithoutSuccess) {
      line += " " + std::to_string(r.chargedMinor) + " " + r.currency;
    }
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> overchargeLines(const OverchargeModel& m) {
  std::vector<std::string> lines;
  for (const Overcharge& o : m.rows()) {
    std::string keys;
    for (const std::string& k : o.idempotencyKeys) keys += (keys.empty() ? "" : ",") + k;
    lines.push_back(o.bizType + "/" + o.bizId + " " + std::to_string(o.owedMinor) + " " +
                    o.currency + " " + keys);
  }
  return lines;
}

// Every text column of the Trace audit's rows but When, " | " between them, as the table shows it.
std::vector<std::string> auditLines(const TraceStoryModel& m) {
  std::vector<std::string> lines;
  for (int row = 0; row < m.rowCount(); ++row) {
    QStringList cells;
    for (int column = TraceStoryModel::Event; column < TraceStoryModel::ColumnCount; ++column) {
      cells << m.index(row, column).data().toString();
    }
    lines.push_back(cells.join(QStringLiteral(" | ")).toStdString());
  }
  return lines;
}

int rowOf(const ReconciliationModel& m, const std::string& bizId, MoneyQuestion q) {
  for (int i = 0; i < m.rowCount(); ++i) {
    if (m.rowAt(i)->bizId == bizId && m.rowAt(i)->question == q) return i;
  }
  return -1;
}

}  // namespace

class TestConsoleViews : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  test::AdminScenario s_;
  std::string alice_;

  std::unique_ptr<MainWindow> openWindow() {
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    o.backoff = ReconnectBackoff(200ms, 1s);
    auto w = std::make_unique<MainWindow>(o);
    // Without the grace period: every row of the test is seconds old.
    w->view<ReconciliationView>()->setSpan({std::chrono::hours(24), std::chrono::seconds(0)});
    w->connectTo(test::settingsFor(db_->dsnAs(alice_)));
    w->show();
    return w;
  }

  static bool reconciled(MainWindow& w) {
    return test::waitUntil([&] {
      return w.session()->isConnected() && !w.view<ReconciliationView>()->isLoading() &&
             w.view<ReconciliationView>()->stamp()->last().isValid();
    });
  }

  // The seeds' incident under one trace: the first try, whose lease runs out (the gateway timed
  // out); the LLM retrying under a new key, refused while the object is in flight; the gateway's
  // callback re-driving the first key; the charge.
  void seedIncident() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    // The first try, whose lease runs out: the gateway timed out.
    BeginRequest first = test::paymentRequest("pay-inc-1", "ord-inc", 1ms);
    first.traceId = "trace-incident";
    first.agentId = "agent-inc";
    client.begin(first);
    QTest::qWait(20);
    QVERIFY(client.expireLeases() >= 1);
    // The LLM retries under a new key: refused, the object is in flight.
    BeginRequest retry = test::paymentRequest("pay-inc-2", "ord-inc");
    retry.traceId = "trace-incident";
    retry.agentId = "agent-inc";
    retry.source = TriggerSource::Llm;
    client.begin(retry);
    // The gateway's callback re-drives the first key, and the charge lands.
    BeginRequest callback = first;
    callback.source = TriggerSource::Callback;
    client.begin(callback);
    client.recordFundFlow(
        {"payment", "ord-inc", FundFlowKind::Debit, 2990, "CNY", "gw-inc-1", "pay-inc-1"});
  }

  // A SUCCESS record without money moved, and a FAILED one whose money moved after all.
  void seedMoneyCases() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    const Claim paid = test::claim(client, test::paymentRequest("pay-nomoney", "ord-nm"));
    QVERIFY(client.complete("pay-nomoney", paid.version, "{}", paid.token).ok());
    client.recordFundFlow(
        {"payment", "ord-failed", FundFlowKind::Debit, 2990, "CNY", "gw-late-1", s_.failed});
  }

 private slots:
  void initTestCase() {
    qRegisterMetaType<SettleDialog*>();
    db_ = std::make_unique<test::TestDatabase>("tst_console_views");
  }

  void init() {
    db_->reset();
    auto c = db_->connect();
    s_ = test::seedScenario(*c);
    alice_ = db_->createLoginRole("alice", "idem_operator");
  }

  void reconciliationRowsAreTheFunctionsRows() {
    seedMoneyCases();
    auto w = openWindow();
    QVERIFY(reconciled(*w));
    ReconciliationModel* m = w->view<ReconciliationView>()->model();
    QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);

    std::vector<std::string> expected = test::keysBySql(*db_, kMovedSql);
    for (const std::string& line : test::keysBySql(*db_, kSuccessSql)) expected.push_back(line);
    QCOMPARE(reconciliationLines(*m), expected);
    QCOMPARE(m->count(MoneyQuestion::MovedWithoutSuccess), 3);  // debited, double, failed
    QCOMPARE(m->count(MoneyQuestion::SuccessWithoutMoney), 1);
    QCOMPARE(w->tabs()->tabText(2), QStringLiteral("Reconciliation (4)"));
    QVERIFY(w->view<ReconciliationView>()->stamp()->text().startsWith(
        QStringLiteral("last refreshed")));

    // A SUCCESS row has nothing to settle; a FAILED record with a charge offers the correction.
    ReconciliationView* v = w->view<ReconciliationView>();
    v->table()->setCurrentIndex(
        m->index(rowOf(*m, "ord-nm", MoneyQuestion::SuccessWithoutMoney), 0));
    QVERIFY(!v->settleAction()->isEnabled());
    QVERIFY(v->settleAction()->toolTip().contains(QStringLiteral("nothing to settle")));
    v->table()->setCurrentIndex(
        m->index(rowOf(*m, "ord-failed", MoneyQuestion::MovedWithoutSuccess), 0));
    QVERIFY(v->settleAction()->isEnabled());
    QCOMPARE(v->settleAction()->text(), QStringLiteral("Correct to SUCCESS\u2026"));
    QSignalSpy opened(v, &ReconciliationView::settleDialogOpened);
    v->settleAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 15000);
    QVERIFY(v->settleDialog()->isCorrection());
    QCOMPARE(v->settleDialog()->findChild<QLineEdit*>(QStringLiteral("settleGatewayRef"))->text(),
             QStringLiteral("gw-late-1"));
    v->settleDialog()->reject();

    // The selected object's records and flows, side by side.
    QTRY_COMPARE_WITH_TIMEOUT(v->object()->fundFlows()->rowCount(), 1, 15000);
    QTRY_COMPARE_WITH_TIMEOUT(v->object()->records()->rowCount(), 1, 15000);
    QAbstractItemModelTester records(v->object()->records(),
                                     QAbstractItemModelTester::FailureReportingMode::QtTest);
  }

  void settleFromReconciliationWithTheChargeAsEvidence() {
    auto w = openWindow();
    QVERIFY(reconciled(*w));
    ReconciliationView* v = w->view<ReconciliationView>();
    ReconciliationModel* m = v->model();
    const int row = rowOf(*m, "ord-debited", MoneyQuestion::MovedWithoutSuccess);
    QVERIFY(row >= 0);
    v->table()->setCurrentIndex(m->index(row, 0));
    QCOMPARE(v->settleAction()->text(), QStringLiteral("Settle SUCCESS\u2026"));
    QVERIFY(v->settleAction()->isEnabled());

    QSignalSpy opened(v, &ReconciliationView::settleDialogOpened);
    v->settleAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 15000);
    SettleDialog* d = v->settleDialog();
    QCOMPARE(d->seen().idempotencyKey, s_.unknownWithDebit);
    QCOMPARE(d->findChild<QLineEdit*>(QStringLiteral("settleGatewayRef"))->text(),
             QStringLiteral("gw-debit-1"));
    const QString json =
        d->findChild<QPlainTextEdit*>(QStringLiteral("settleEvidenceJson"))->toPlainText();
    QVERIFY2(json.contains(QStringLiteral("\"flow_kind\":\"DEBIT\"")), qPrintable(json));
    QVERIFY(json.contains(QStringLiteral("\"amount_minor\":2990")));

    // The reason is still the operator's to give.
    auto* settle = d->findChild<QPushButton*>(QStringLiteral("settleButton"));
    QTest::mouseClick(settle, Qt::LeftButton);
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'pay-debited'"),
             std::string("UNKNOWN"));

    QSignalSpy settled(v, &ReconciliationView::recordSettled);
    d->findChild<QPlainTextEdit*>(QStringLiteral("settleReason"))
        ->setPlainText(QStringLiteral("gateway shows the charge"));
    QTest::mouseClick(settle, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(settled.count(), 1, 15000);
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'pay-debited'"),
             std::string("SUCCESS"));
    QCOMPARE(test::textBySql(*db_,
                             "SELECT actor || ' ' || actor_kind || ' ' || reason || ' ' || "
                             "(evidence->>'gateway_ref') FROM idem.transitions WHERE "
                             "idempotency_key = 'pay-debited' ORDER BY id DESC LIMIT 1"),
             alice_ + " operator gateway shows the charge gw-debit-1");
    // Settled: the business object leaves the question.
    QTRY_VERIFY_WITH_TIMEOUT(rowOf(*m, "ord-debited", MoneyQuestion::MovedWithoutSuccess) < 0,
                             15000);
  }

  void overchargeLeavesOnceTheRefundIsRecorded() {
    auto w = openWindow();
    OverchargesView* v = w->view<OverchargesView>();
    QAbstractItemModelTester tester(v->model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY_WITH_TIMEOUT(v->stamp()->last().isValid() && !v->isLoading(), 15000);
    QCOMPARE(overchargeLines(*v->model()), test::keysBySql(*db_, kOverchargedSql));
    QCOMPARE(v->model()->rowCount(), 1);
    QCOMPARE(v->model()->index(0, OverchargeModel::Owed).data().toString(),
             QStringLiteral("29.90 CNY"));
    QCOMPARE(v->model()->index(0, OverchargeModel::Keys).data().toString(),
             QString::fromStdString(s_.unknownDoubleDebit));
    QCOMPARE(w->tabs()->tabText(3), QStringLiteral("Overcharges (1)"));
    // Export writes the tab shown: the overcharge, the amount owed in minor units.
    w->tabs()->setCurrentWidget(v);
    QBuffer csv;
    QVERIFY(csv.open(QIODevice::WriteOnly));
    QCOMPARE(w->exportCsv(csv), 1);
    QVERIFY2(csv.data().contains("payment,ord-double,2990,5980,0,2"), csv.data().constData());

    {
      auto c = db_->connect();
      ProtocolClient(*c).recordFundFlow({"payment", "ord-double", FundFlowKind::Refund, 2990, "CNY",
                                         "gw-refund-1", s_.unknownDoubleDebit});
    }
    w->refreshNow();
    QTRY_COMPARE_WITH_TIMEOUT(v->model()->rowCount(), 0, 15000);
    QCOMPARE(test::keysBySql(*db_, kOverchargedSql), std::vector<std::string>{});
    QCOMPARE(w->tabs()->tabText(3), QStringLiteral("Overcharges"));
  }

  void traceSearchTellsTheIncidentInOrder() {
    seedIncident();
    auto w = openWindow();
    TraceAuditView* v = w->view<TraceAuditView>();
    QAbstractItemModelTester tester(v->model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->isConnected(), 15000);
    v->searchField()->setText(QStringLiteral("trace-incident"));
    QTest::keyClick(v->searchField(), Qt::Key_Return);
    QTRY_VERIFY_WITH_TIMEOUT(!v->isLoading() && v->model()->rowCount() > 0, 15000);
    QVERIFY2(v->lastError().isEmpty(), qPrintable(v->lastError()));

    std::vector<std::string> shown;
    for (const StoryEvent& e : v->model()->rows()) {
      const std::string_view what = e.source     ? format(*e.source)
                                    : e.toStatus ? format(*e.toStatus)
                                    : e.flowKind ? format(*e.flowKind)
                                                 : "-";
      shown.push_back(std::string(eventTable(e.kind)) + " " + (e.key.empty() ? "-" : e.key) + " " +
                      std::string(what));
    }
    QCOMPARE(shown,
             test::keysBySql(*db_,
                             "SELECT event || ' ' || coalesce(idempotency_key, '-') || ' ' || "
                             "coalesce(trigger_source, to_status, flow_kind, '-') FROM "
                             "idem.trace_story('trace-incident', NULL)"));
    const std::vector<std::string> story{
        "attempt pay-inc-1 initial",    "transition pay-inc-1 PROCESSING",
        "transition pay-inc-1 UNKNOWN", "attempt pay-inc-2 llm",
        "attempt pay-inc-1 callback",   "fund_flow pay-inc-1 DEBIT"};
    QCOMPARE(shown, story);

    // An event with a business object hands it to the timeline hook.
    QSignalSpy chosen(w.get(), &MainWindow::businessObjectChosen);
    v->table()->setCurrentIndex(v->model()->index(5, 0));
    QCOMPARE(chosen.count(), 1);
    QCOMPARE(chosen.at(0).at(1).toString(), QStringLiteral("ord-inc"));
    QVERIFY(v->stamp()->last().isValid());

    // By agent: the same attempts.
    v->search(StorySubject::Agent, QStringLiteral("agent-inc"));
    QTRY_VERIFY_WITH_TIMEOUT(!v->isLoading() && v->model()->rowCount() > 0, 15000);
    QCOMPARE(static_cast<int>(v->model()->rowCount()), static_cast<int>(story.size()));
  }

  void traceAuditShowsEveryColumnOfTheStory() {
    seedIncident();
    auto w = openWindow();
    TraceAuditView* v = w->view<TraceAuditView>();
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->isConnected(), 15000);
    v->search(StorySubject::Trace, QStringLiteral("trace-incident"));
    QTRY_VERIFY_WITH_TIMEOUT(!v->isLoading() && v->model()->rowCount() == 6, 15000);
    const TraceStoryModel& m = *v->model();

    // The transitions' actor is whoever ran the protocol functions: the test's login.
    const std::string actor =
        test::textBySql(*db_,
                        "SELECT DISTINCT actor || ' (' || actor_kind || ')' FROM idem.transitions "
                        "WHERE idempotency_key = 'pay-inc-1'");
    const std::string lease = test::textBySql(
        *db_,
        "SELECT reason FROM idem.transitions WHERE idempotency_key = 'pay-inc-1' AND "
        "to_status = 'UNKNOWN'");
    QVERIFY2(lease.starts_with("lease expired"), lease.c_str());
    const std::vector<std::string> expected{
        "attempt | pay-inc-1 | initial | executed |  |  |  |  | agent-inc | trace-incident",
        "transition | pay-inc-1 |  |  | (new) \u2192 PROCESSING | " + actor + " |  |  |  | ",
        "transition | pay-inc-1 |  |  | PROCESSING \u2192 UNKNOWN | " + actor + " |  | " + lease +
            " |  | ",
        "attempt | pay-inc-2 | llm | rejected |  |  |  |  | agent-inc | trace-incident",
        "attempt | pay-inc-1 | callback | in_progress |  |  |  |  | agent-inc | trace-incident",
        "fund_flow | pay-inc-1 |  |  |  |  | DEBIT 29.90 CNY |  |  | "};
    QCOMPARE(auditLines(m), expected);

    // When: local time on screen, exact UTC in the tooltip and the export.
    QCOMPARE(test::keysBySql(*db_,
                             "SELECT to_char(at AT TIME ZONE 'UTC', "
                             "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM "
                             "idem.trace_story('trace-incident', NULL)")
                 .front(),
             m.index(0, TraceStoryModel::When)
                 .data(TraceStoryModel::ExportRole)
                 .toString()
                 .toStdString());
    for (int row = 0; row < m.rowCount(); ++row) {
      const QModelIndex when = m.index(row, TraceStoryModel::When);
      QVERIFY(!when.data().toString().isEmpty());
      QCOMPARE(when.data(Qt::ToolTipRole), when.data(TraceStoryModel::ExportRole));
      QVERIFY(when.data().toString() != when.data(TraceStoryModel::ExportRole).toString());
      for (int column = TraceStoryModel::Event; column < TraceStoryModel::ColumnCount; ++column) {
        QCOMPARE(m.index(row, column).data(TraceStoryModel::ExportRole),
                 m.index(row, column).data());
      }
      // Which business object each event belongs to, for the timeline hook.
      QCOMPARE(m.index(row, 0).data(TraceStoryModel::BizTypeRole).toString(),
               QStringLiteral("payment"));
      QCOMPARE(m.index(row, 0).data(TraceStoryModel::BizIdRole).toString(),
               QStringLiteral("ord-inc"));
      QCOMPARE(m.index(row, 0).data(TraceStoryModel::EventRole),
               m.index(row, TraceStoryModel::Event).data());
    }

    // Fonts: attempts plain, transitions (the lease expiry too) italic, fund flows bold.
    QVERIFY(!m.index(0, TraceStoryModel::Event).data(Qt::FontRole).isValid());
    for (int row : {1, 2}) {
      const auto font = m.index(row, TraceStoryModel::Event).data(Qt::FontRole).value<QFont>();
      QVERIFY(font.italic() && !font.bold());
    }
    const auto flowFont = m.index(5, TraceStoryModel::Event).data(Qt::FontRole).value<QFont>();
    QVERIFY(flowFont.bold() && !flowFont.italic());

    // Colours and tooltips: outcomes by the palette, transitions by the status they reached.
    QVERIFY(!m.index(0, TraceStoryModel::Outcome).data(Qt::ForegroundRole).isValid());
    QCOMPARE(m.index(0, TraceStoryModel::Outcome).data(Qt::ToolTipRole).toString(),
             outcomeMeaning(Outcome::Executed));
    for (const auto& [row, outcome] : {std::pair{3, Outcome::Rejected}, {4, Outcome::InProgress}}) {
      const QModelIndex cell = m.index(row, TraceStoryModel::Outcome);
      QCOMPARE(cell.data(Qt::ToolTipRole).toString(), outcomeMeaning(outcome));
      const QColor colour = outcomeForeground(outcome);
      QCOMPARE(cell.data(Qt::ForegroundRole).isValid(), colour.isValid());
      if (colour.isValid()) QCOMPARE(cell.data(Qt::ForegroundRole).value<QBrush>().color(), colour);
    }
    QCOMPARE(m.index(1, TraceStoryModel::FromTo).data(Qt::ForegroundRole).value<QBrush>().color(),
             statusForeground(RecordStatus::Processing));
    QCOMPARE(m.index(2, TraceStoryModel::FromTo).data(Qt::ForegroundRole).value<QBrush>().color(),
             statusForeground(RecordStatus::Unknown));
    QVERIFY(!m.index(0, TraceStoryModel::FromTo).data(Qt::ForegroundRole).isValid());
    QCOMPARE(m.index(5, TraceStoryModel::Flow).data(Qt::ToolTipRole).toString(),
             QStringLiteral("gateway ref gw-inc-1"));
    QVERIFY(!m.index(0, TraceStoryModel::Flow).data(Qt::ToolTipRole).isValid());
    QVERIFY(!m.index(1, TraceStoryModel::Outcome).data(Qt::ToolTipRole).isValid());
  }

  void copyPutsTheWholeCellOnTheClipboard() {
    auto w = openWindow();
    QTRY_VERIFY_WITH_TIMEOUT(w->recordsModel()->rowCount() > 0, 15000);
    RecordTableView* view = w->recordsView();
    view->setColumnWidth(RecordTableModel::Key, 30);  // elided on screen, whole on the clipboard
    const QModelIndex key = w->recordsModel()->index(0, RecordTableModel::Key);
    view->setCurrentIndex(key);
    view->setFocus();
    QGuiApplication::clipboard()->clear();
    auto* copy = view->findChild<QAction*>(QStringLiteral("copyCellAction"));
    QVERIFY(copy != nullptr);
    QVERIFY(view->actions().contains(copy));  // the context menu's Copy
    QCOMPARE(view->contextMenuPolicy(), Qt::ActionsContextMenu);
    QTest::keySequence(view, QKeySequence::Copy);
    QCOMPARE(QGuiApplication::clipboard()->text(), key.data().toString());
    QVERIFY(!key.data().toString().isEmpty());
    // Every table of the new tabs copies too, and keys elide from the left.
    QVERIFY(w->view<ReconciliationView>()->table()->findChild<QAction*>(
                QStringLiteral("copyCellAction")) != nullptr);
    QVERIFY(view->itemDelegateForColumn(RecordTableModel::Key) != nullptr);
    QVERIFY(view->itemDelegateForColumn(RecordTableModel::BizId) != nullptr);
  }

  void windowTitleFollowsTheFilter() {
    auto w = openWindow();
    QTRY_VERIFY_WITH_TIMEOUT(w->windowTitle().contains(QString::fromStdString(alice_)), 15000);
    QVERIFY(!w->windowTitle().contains(QStringLiteral("biz id")));
    w->filterBar()->bizIdPrefixEdit()->setText(QStringLiteral("ord-d"));
    w->filterBar()->applyNow();
    QVERIFY2(w->windowTitle().contains(QStringLiteral("biz id ord-d*")),
             qPrintable(w->windowTitle()));
    w->filterBar()->clear();
    w->filterBar()->applyNow();
    QVERIFY(!w->windowTitle().contains(QStringLiteral("biz id")));
    QTRY_VERIFY_WITH_TIMEOUT(w.get()
                                 ->findChild<RefreshStamp*>(QStringLiteral("recordsRefreshStamp"))
                                 ->text()
                                 .startsWith("last refreshed"),
                             15000);
  }

  // docs/screenshots/admin-*.png, when IDEMWATCH_SCREENSHOT_DIR names the folder.
  void screenshotsOfTheNewTabs() {
    const QString dir = qEnvironmentVariable("IDEMWATCH_SCREENSHOT_DIR");
    if (dir.isEmpty()) QSKIP("IDEMWATCH_SCREENSHOT_DIR is not set");
    seedMoneyCases();
    seedIncident();
    auto w = openWindow();
    w->resize(1500, 900);
    QVERIFY(reconciled(*w));
    OverchargesView* over = w->view<OverchargesView>();
    QTRY_VERIFY_WITH_TIMEOUT(over->stamp()->last().isValid(), 15000);
    ReconciliationView* rec = w->view<ReconciliationView>();
    rec->table()->setCurrentIndex(rec->model()->index(
        rowOf(*rec->model(), "ord-double", MoneyQuestion::MovedWithoutSuccess), 0));
    QTRY_VERIFY_WITH_TIMEOUT(rec->object()->fundFlows()->rowCount() == 2, 15000);
    over->table()->setCurrentIndex(over->model()->index(0, 0));
    QTRY_VERIFY_WITH_TIMEOUT(over->object()->fundFlows()->rowCount() == 2, 15000);
    w->view<TraceAuditView>()->search(StorySubject::Trace, QStringLiteral("trace-incident"));
    QTRY_VERIFY_WITH_TIMEOUT(w->view<TraceAuditView>()->model()->rowCount() == 6, 15000);
    w->view<TraceAuditView>()->table()->setCurrentIndex(
        w->view<TraceAuditView>()->model()->index(3, 0));
    const std::pair<QWidget*, const char*> tabs[] = {
        {rec, "admin-reconciliation.png"},
        {over, "admin-overcharges.png"},
        {w->view<TraceAuditView>(), "admin-trace-audit.png"}};
    for (const auto& [tab, file] : tabs) {
      w->tabs()->setCurrentWidget(tab);
      QTest::qWait(200);
      QVERIFY(w->grab().save(dir + QLatin1Char('/') + QLatin1String(file)));
    }
  }
};

QTEST_MAIN(TestConsoleViews)
#include "tst_console_views.moc"

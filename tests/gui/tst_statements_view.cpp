// The Statements tab, through the real window against a real PostgreSQL: a statement imported
// through the protocol functions (open_statement, add_statement_lines, close_statement in one
// transaction) shows its file, the lines a person must look at with the sentence matching wrote,
// and what final statements cover with their gaps. For an unmatched line, the stuck records of
// equal amount and currency created near its booking are proposed, and only those; rejecting one
// hides it and writes nothing; accepting one settles its record SUCCESS through the settle dialog,
// with a reason and the line as evidence. A record the gateway's word resolved reads so in words
// in its timeline.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QCheckBox>
#include <QDateTime>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTreeView>
#include <QtTest>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/gateway_evidence_text.hpp"
#include "models/match_proposal_model.hpp"
#include "models/selected_record.hpp"
#include "models/statement_line_model.hpp"
#include "models/statement_model.hpp"
#include "models/transition_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/match_proposals_panel.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/settle_dialog.hpp"
#include "widgets/statements_view.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

struct Line {
  std::string lineId;
  long long sourceLine = 2;
  std::string kind = "DEBIT";  // empty: a fee, not a flow
  long long amount = 2990;
  std::string currency = "CNY";
  std::string key{};
  std::string ref{};
  std::string bookedAt{};  // empty: now
};

std::string nowUtc() {
  return QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
}

std::string toJson(const std::vector<Line>& lines) {
  std::string out = "[";
  for (const Line& l : lines) {
    if (out.size() > 1) out += ",";
    out += "{\"line_id\":\"" + l.lineId + "\",\"source_line\":" + std::to_string(l.sourceLine) +
           ",\"category\":\"" + (l.kind.empty() ? "fee" : "charge") + "\"" +
           (l.kind.empty() ? "" : ",\"flow_kind\":\"" + l.kind + "\"") +
           ",\"amount_minor\":" + std::to_string(l.amount) + ",\"currency\":\"" + l.currency +
           "\"" + (l.key.empty() ? "" : ",\"idempotency_key\":\"" + l.key + "\"") +
           (l.ref.empty() ? "" : ",\"gateway_ref\":\"" + l.ref + "\"") +
           ",\"booked\":true,\"booked_at\":\"" + (l.bookedAt.empty() ? nowUtc() : l.bookedAt) +
           "\",\"fields\":{}}";
  }
  return out + "]";
}

constexpr const char* kLinesToLookAt =
    "SELECT result || ' ' || line_id || ' ' || amount_minor || ' ' || currency FROM "
    "idem.statement_lines WHERE result IN ('mismatched', 'unmatched', 'duplicate') ORDER BY id "
    "DESC";

}  // namespace

class TestStatementsView : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  test::AdminScenario s_;
  std::string alice_;
  int files_ = 0;

  // One file through the importer's three calls, in one transaction, as the superuser. `period`
  // "from/to" makes it final.
  long long importFile(const std::string& fileName, const std::vector<Line>& lines,
                       const std::string& period = {}) {
    auto c = db_->connect();
    pqxx::work tx(*c);
    const std::string sha = QByteArray::number(++files_).rightJustified(64, '0').toStdString();
    const long long id =
        tx.exec_params1("SELECT statement_id FROM idem.open_statement('stripe', 'stripe', $1, $2)",
                        fileName, sha)[0]
            .as<long long>();
    tx.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", id, toJson(lines));
    const std::string from = period.empty() ? "" : period.substr(0, period.find('/'));
    const std::string to = period.empty() ? "" : period.substr(period.find('/') + 1);
    tx.exec_params(
        "SELECT * FROM idem.close_statement($1, $2, nullif($3, '')::timestamptz, "
        "nullif($4, '')::timestamptz, $5)",
        id, static_cast<long long>(lines.size()), from, to, !period.empty());
    tx.commit();
    return id;
  }

  // An UNKNOWN payment whose request asked `amount` in `currency`.
  void unknownPayment(const std::string& key, long long amount, const std::string& currency) {
    auto c = db_->connect();
    ProtocolClient client(*c);
    BeginRequest r = test::paymentRequest(key, "ord-" + key);
    r.requestPayload =
        "{\"amount_minor\": " + std::to_string(amount) + ", \"currency\": \"" + currency + "\"}";
    const Claim claim = test::claim(client, r);
    QVERIFY(client.markUnknown(key, claim.version, "no answer within 5s", claim.token).ok());
  }

  std::unique_ptr<MainWindow> openWindow() {
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    o.backoff = ReconnectBackoff(200ms, 1s);
    auto w = std::make_unique<MainWindow>(o);
    w->connectTo(test::settingsFor(db_->dsnAs(alice_)));
    w->show();
    return w;
  }

  static bool loaded(StatementsView& v, int files) {
    return test::waitUntil([&] {
      return !v.isLoading() && v.model()->rowCount() == files && v.stamp()->last().isValid();
    });
  }

  static int rowOfLine(const StatementLineModel& m, const std::string& lineId) {
    for (int row = 0; row < m.rowCount(); ++row) {
      if (m.lineAt(row)->lineId == lineId) return row;
    }
    return -1;
  }

 private slots:
  void initTestCase() {
    qRegisterMetaType<SettleDialog*>();
    db_ = std::make_unique<test::TestDatabase>("tst_statements_view");
  }

  void init() {
    db_->reset();
    auto c = db_->connect();
    s_ = test::seedScenario(*c);
    alice_ = db_->createLoginRole("alice", "idem_operator");
    files_ = 0;
  }

  void anImportedFileShowsItsLinesToLookAt() {
    const long long first =
        importFile("day-1.csv",
                   {{.lineId = "txn_unmatched", .sourceLine = 2, .amount = 1234},
                    {.lineId = "txn_mismatch", .sourceLine = 3, .amount = 9999, .key = s_.unknown},
                    {.lineId = "txn_fee", .sourceLine = 4, .kind = "", .amount = 50}},
                   "2026-12-01T00:00:00Z/2026-12-02T00:00:00Z");
    importFile("day-3.csv", {{.lineId = "txn_later", .sourceLine = 2, .amount = 777}},
               "2026-12-03T00:00:00Z/2026-12-04T00:00:00Z");

    auto w = openWindow();
    StatementsView* v = w->view<StatementsView>();
    QVERIFY(v != nullptr);
    QAbstractItemModelTester files(v->model(),
                                   QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester lines(v->lines(),
                                   QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(loaded(*v, 2));

    // Newest import first; the first file holds three lines, two for a person.
    const int row = v->model()->rowOfId(first);
    QCOMPARE(row, 1);
    QCOMPARE(v->model()->index(row, StatementModel::File).data().toString(),
             QStringLiteral("day-1.csv"));
    QCOMPARE(v->model()->index(row, StatementModel::Final).data().toString(),
             QStringLiteral("final"));
    QCOMPARE(v->model()->index(row, StatementModel::Lines).data().toLongLong(), 3);
    QCOMPARE(v->model()->index(row, StatementModel::NeedsPerson).data().toLongLong(), 2);

    // Every file's lines to look at, newest first, as SQL lists them.
    QTRY_COMPARE_WITH_TIMEOUT(v->lines()->rowCount(), 3, 15000);
    std::vector<std::string> shown;
    for (const StatementLine& l : v->lines()->rows()) {
      shown.push_back(std::string(format(l.result)) + " " + l.lineId + " " +
                      std::to_string(l.amountMinor) + " " + l.currency);
    }
    QCOMPARE(shown, test::keysBySql(*db_, kLinesToLookAt));
    const int mismatch = rowOfLine(*v->lines(), "txn_mismatch");
    QCOMPARE(v->lines()->index(mismatch, StatementLineModel::Amount).data().toString(),
             QStringLiteral("99.99 CNY"));
    QCOMPARE(v->lines()->index(mismatch, StatementLineModel::Key).data().toString(),
             QString::fromStdString(s_.unknown));
    QVERIFY2(v->lines()
                 ->index(mismatch, StatementLineModel::Detail)
                 .data()
                 .toString()
                 .contains(QStringLiteral("2990")),
             qPrintable(v->lines()->index(mismatch, StatementLineModel::Detail).data().toString()));
    QCOMPARE(v->lines()->index(mismatch, StatementLineModel::Line).data().toString(),
             QStringLiteral("day-1.csv:3"));
    QCOMPARE(w->tabs()->tabText(w->tabs()->indexOf(v)), QStringLiteral("Statements (3)"));

    // Only the selected file's lines.
    v->onlySelectedFile()->setChecked(true);
    v->filesTable()->setCurrentIndex(v->model()->index(row, 0));
    QTRY_VERIFY_WITH_TIMEOUT(!v->lines()->isLoading() && v->lines()->statement() == first, 15000);
    QTRY_COMPARE_WITH_TIMEOUT(v->lines()->rowCount(), 2, 15000);
    QCOMPARE(rowOfLine(*v->lines(), "txn_later"), -1);

    // The two final days leave the second uncovered: absence is no evidence there.
    const QString coverage = v->coverageText();
    QVERIFY2(coverage.contains(QStringLiteral("stripe")), qPrintable(coverage));
    QVERIFY2(coverage.contains(QStringLiteral("Gap")), qPrintable(coverage));
    QVERIFY2(coverage.contains(QStringLiteral("2 final of 2 file(s)")), qPrintable(coverage));
  }

  void anAcceptedProposalSettlesItsRecordWithTheLine() {
    unknownPayment("pay-prop-a", 1234, "CNY");
    unknownPayment("pay-prop-b", 1234, "CNY");
    unknownPayment("pay-other-amount", 4500, "CNY");
    unknownPayment("pay-other-currency", 1234, "USD");
    const long long file = importFile(
        "day.csv", {{.lineId = "txn_123", .sourceLine = 7, .amount = 1234, .ref = "ch_123"}});

    auto w = openWindow();
    StatementsView* v = w->view<StatementsView>();
    QVERIFY(loaded(*v, 1));
    QTRY_COMPARE_WITH_TIMEOUT(v->lines()->rowCount(), 1, 15000);
    MatchProposalsPanel* p = v->proposals();
    QAbstractItemModelTester tester(p->model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    v->linesTable()->setCurrentIndex(v->lines()->index(0, 0));
    QTRY_VERIFY_WITH_TIMEOUT(!p->isLoading() && p->model()->rowCount() == 2, 15000);

    // Only the records of equal amount and currency are proposed.
    std::vector<std::string> keys;
    for (const MatchProposal& m : p->model()->rows()) keys.push_back(m.key);
    std::sort(keys.begin(), keys.end());
    QCOMPARE(keys, (std::vector<std::string>{"pay-prop-a", "pay-prop-b"}));
    QCOMPARE(p->model()->index(0, MatchProposalModel::Amount).data().toString(),
             QStringLiteral("12.34 CNY"));

    // Rejecting hides one for the session and writes nothing.
    const int b = keys[0] == p->model()->rows()[0].key ? 1 : 0;
    p->table()->setCurrentIndex(p->model()->index(b, 0));
    p->rejectAction()->trigger();
    QCOMPARE(p->model()->rowCount(), 1);
    QCOMPARE(p->model()->rows()[0].key, std::string("pay-prop-a"));
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'pay-prop-b'"),
             std::string("UNKNOWN"));
    v->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(!p->isLoading(), 15000);
    QCOMPARE(p->model()->rowCount(), 1);

    // Accepting opens the settle dialog with the line as evidence; the reason is the operator's.
    p->table()->setCurrentIndex(p->model()->index(0, 0));
    QVERIFY(p->acceptAction()->isEnabled());
    QSignalSpy opened(p, &MatchProposalsPanel::settleDialogOpened);
    p->acceptAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 15000);
    SettleDialog* d = p->settleDialog();
    QCOMPARE(d->seen().idempotencyKey, std::string("pay-prop-a"));
    QCOMPARE(d->findChild<QLineEdit*>(QStringLiteral("settleGatewayRef"))->text(),
             QStringLiteral("ch_123"));
    auto* settle = d->findChild<QPushButton*>(QStringLiteral("settleButton"));
    QTest::mouseClick(settle, Qt::LeftButton);
    QCOMPARE(d->phase(), SettleDialog::Phase::Editing);
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'pay-prop-a'"),
             std::string("UNKNOWN"));

    QSignalSpy settled(p, &MatchProposalsPanel::recordSettled);
    d->findChild<QPlainTextEdit*>(QStringLiteral("settleReason"))
        ->setPlainText(QStringLiteral("statement line txn_123 is this payment"));
    QTest::mouseClick(settle, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(settled.count(), 1, 15000);
    QCOMPARE(test::textBySql(
                 *db_,
                 "SELECT r.status || ' ' || t.actor || ' ' || t.actor_kind || ' ' || t.reason || "
                 "' ' || (t.evidence->>'source') || ' ' || (t.evidence->>'gateway') || ' ' || "
                 "(t.evidence->>'statement_id') || ' ' || (t.evidence->>'line_id') || ' ' || "
                 "(t.evidence->>'accepted_proposal') || ' ' || (t.evidence->>'gateway_ref') "
                 "FROM idem.records r JOIN idem.transitions t USING (idempotency_key) WHERE "
                 "r.idempotency_key = 'pay-prop-a' ORDER BY t.id DESC LIMIT 1"),
             "SUCCESS " + alice_ +
                 " operator statement line txn_123 is this payment statement stripe " +
                 std::to_string(file) + " txn_123 true ch_123");
    // Settled, it is no longer a candidate.
    QTRY_VERIFY_WITH_TIMEOUT(!p->isLoading() && p->model()->rowCount() == 0, 15000);
    // The line is the record's side effect now: matched to it, its flow in the ledger, and no
    // longer among the lines to look at.
    QCOMPARE(test::textBySql(*db_,
                             "SELECT l.result || ' ' || l.record_key || ' ' || f.external_ref || "
                             "' ' || f.idempotency_key || ' ' || f.amount_minor || ' ' || "
                             "f.recorded_by FROM idem.statement_lines l JOIN idem.fund_flows f ON "
                             "f.id = l.flow_id WHERE l.line_id = 'txn_123'"),
             std::string("matched pay-prop-a ch_123 pay-prop-a 1234 ledger"));
    v->refresh();
    QTRY_COMPARE_WITH_TIMEOUT(v->lines()->rowCount(), 0, 15000);
  }

  void aRecordResolvedByAStatementLineSaysSoInItsTimeline() {
    unknownPayment("pay-stmt", 2990, "CNY");
    importFile("day.csv", {{.lineId = "txn_7", .sourceLine = 7, .key = "pay-stmt"}});
    QCOMPARE(test::textBySql(*db_,
                             "SELECT status FROM idem.records WHERE idempotency_key = "
                             "'pay-stmt'"),
             std::string("SUCCESS"));

    auto w = openWindow();
    QTRY_VERIFY_WITH_TIMEOUT(w->selectRecord(QStringLiteral("pay-stmt")), 15000);
    TransitionModel* timeline = w->selectedRecord()->transitions();
    QAbstractItemModelTester tester(timeline,
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY_WITH_TIMEOUT(timeline->rowCount() == 3, 15000);
    const QModelIndex evidence = timeline->index(2, TransitionModel::Evidence);
    QCOMPARE(evidence.data().toString(),
             QStringLiteral("resolved SUCCESS by stripe's statement line txn_7 (day.csv, line 7)"));
    // The whole JSON stays in the tooltip and the export.
    QVERIFY(evidence.data(Qt::ToolTipRole).toString().contains(QStringLiteral("\"line_id\"")));
    QVERIFY(evidence.data(TransitionModel::ExportRole).toString().startsWith(QLatin1Char('{')));
  }

  void gatewayEvidenceReadsAsASentence_data() {
    QTest::addColumn<int>("to");
    QTest::addColumn<int>("actorKind");
    QTest::addColumn<QString>("evidence");
    QTest::addColumn<QString>("sentence");
    const int success = static_cast<int>(RecordStatus::Success);
    const int failed = static_cast<int>(RecordStatus::Failed);
    const int reconciler = static_cast<int>(ActorKind::Reconciler);
    QTest::newRow("callback")
        << success << reconciler
        << R"({"source": "callback", "gateway": "stripe", "event_id": "evt_1"})"
        << "resolved SUCCESS by a callback evt_1 from stripe";
    QTest::newRow("lookup") << failed << reconciler
                            << R"({"source": "lookup", "gateway": "adyen", "event_id": "q-9"})"
                            << "resolved FAILED by the status lookup at adyen (answer q-9)";
    QTest::newRow("stored line, a later pass")
        << success << reconciler
        << R"({"source": "statement", "gateway": "stripe", "ref": "txn_9", "flow_id": 4})"
        << "resolved SUCCESS by stripe's statement line txn_9";
    QTest::newRow("absence")
        << failed << reconciler
        << "{\"source\": \"statement_absence\", \"gateway\": \"stripe\", \"periods\": "
           "\"{[2026-12-01 00:00:00+00,2026-12-05 00:00:00+00)}\", \"settlement_delay\": "
           "\"3 days\"}"
        << "resolved FAILED: absent from stripe's final statements for {[2026-12-01 "
           "00:00:00+00,2026-12-05 00:00:00+00)}, settlement delay 3 days";
    QTest::newRow("accepted proposal")
        << success << static_cast<int>(ActorKind::Operator)
        << R"({"source": "statement", "gateway": "stripe", "line_id": "txn_1", "file": "d.csv", "source_line": 3, "accepted_proposal": true})"
        << "settled SUCCESS by stripe's statement line txn_1 (d.csv, line 3), a proposed match "
           "a person accepted";
    QTest::newRow("no source: its JSON") << success << reconciler << R"({"lookup": "gw-9"})"
                                         << "";
    QTest::newRow("the ledger's own source")
        << success << reconciler << R"({"source": "ledger", "flow_id": 3})"
        << "";
  }

  void gatewayEvidenceReadsAsASentence() {
    QFETCH(int, to);
    QFETCH(int, actorKind);
    QFETCH(QString, evidence);
    QFETCH(QString, sentence);
    Transition t;
    t.toStatus = static_cast<RecordStatus>(to);
    t.actorKind = static_cast<ActorKind>(actorKind);
    t.evidence = evidence.toStdString();
    QCOMPARE(gatewayEvidenceSentence(t), sentence);
  }
};

QTEST_MAIN(TestStatementsView)
#include "tst_statements_view.moc"

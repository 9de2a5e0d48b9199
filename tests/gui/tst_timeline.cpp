// The story as a picture, from a simulated incident made through the protocol functions: the first
// try, a gateway timeout that becomes UNKNOWN when the lease expires, the LLM's retry 4 s... (here:
// a moment) later under a new key, a callback re-drive of the first key, and two DEBITs. The
// timeline draws exactly one mark per row of idem.business_object_story (counted as scene items),
// in time order left to right, one lane per key, labels the retry by its source, and exports a PNG
// that loads back at the scene's size.
#include <QGraphicsItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <thread>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "models/timeline_events.hpp"
#include "models/trace_story_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/timeline_view.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

QString childText(const QGraphicsItem* item) {
  QStringList texts;
  for (const QGraphicsItem* c : item->childItems()) {
    if (const auto* t = dynamic_cast<const QGraphicsSimpleTextItem*>(c)) texts << t->text();
  }
  return texts.join(QLatin1Char(' '));
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<DatabaseSession> session_;

  // The incident's two keys: the first try (re-driven by the callback) and the LLM's retry.
  static constexpr const char* kFirstKey = "pay:ord-incident:try-1";
  static constexpr const char* kRetryKey = "pay:ord-incident:llm-retry";

  void simulateIncident() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    // The first try: claimed, sent to the gateway, which times out; nobody answers.
    BeginRequest first = test::paymentRequest(kFirstKey, "ord-incident", 150ms);
    first.agentId = "llm-agent-1";
    first.traceId = "trace-incident";
    test::claim(client, first);
    // The gateway did charge.
    client.recordFundFlow({"payment", "ord-incident", FundFlowKind::Debit, 2990, "CNY",
                           "gw-charge-1", std::string(kFirstKey)});
    std::this_thread::sleep_for(200ms);
    QCOMPARE(client.expireLeases(), 1);  // PROCESSING -> UNKNOWN: the lease expiry
    // The LLM retries under a new key.
    std::this_thread::sleep_for(50ms);
    BeginRequest retry = test::paymentRequest(kRetryKey, "ord-incident");
    retry.source = TriggerSource::Llm;
    retry.agentId = "llm-agent-1";
    retry.traceId = "trace-incident";
    client.begin(retry);
    // The gateway's callback re-drives the first key.
    BeginRequest callback = test::paymentRequest(kFirstKey, "ord-incident");
    callback.source = TriggerSource::Callback;
    client.begin(callback);
    // And the gateway charges a second time, under the retry's key.
    client.recordFundFlow({"payment", "ord-incident", FundFlowKind::Debit, 2990, "CNY",
                           "gw-charge-2", std::string(kRetryKey)});
  }

  long long storyRows() {
    return db_->scalar(
        "SELECT count(*) FROM idem.business_object_story('payment', 'ord-incident')");
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_timeline");
    simulateIncident();
    session_ = test::connectedSession(db_->dsn());
    QVERIFY(session_->isConnected());
  }

  void cleanupTestCase() { session_.reset(); }

  void theStoryReadsEveryRowAndFindsTheLeaseExpiry() {
    auto c = db_->connect();
    const BusinessObjectStory story = readBusinessObjectStory(*c, "payment", "ord-incident");
    QCOMPARE(static_cast<long long>(story.events.size()), storyRows());
    QVERIFY(!story.truncated);
    int expiries = 0;
    for (const StoryEvent& e : story.events) {
      if (e.kind == StoryEventKind::LeaseExpiry) {
        ++expiries;
        QCOMPARE(e.key, std::string(kFirstKey));
      }
    }
    QCOMPARE(expiries, 1);
    const BusinessObjectStory cut = readBusinessObjectStory(*c, "payment", "ord-incident", 3);
    QCOMPARE(cut.events.size(), std::size_t(3));
    QVERIFY(cut.truncated);

    const TimelineLayout layout(story);
    QCOMPARE(layout.lanes(), (std::vector<std::string>{kFirstKey, kRetryKey}));
    const std::vector<Timestamp> ticks = layout.ticks();
    QVERIFY(!ticks.empty());
    QVERIFY(std::is_sorted(ticks.begin(), ticks.end()));
    QVERIFY(ticks.front() >= layout.first() && ticks.back() <= layout.last());
  }

  void theTraceAuditReadsTheEventsAsTheTimelineDoes() {
    auto c = db_->connect();
    const BusinessObjectStory story = readBusinessObjectStory(*c, "payment", "ord-incident");
    const std::vector<StoryEvent> trace =
        readTraceStory(*c, {StorySubject::Trace, "trace-incident"});
    // The trace has the first try and the retry (the callback came under another trace id), their
    // keys' transitions and the object's flows: each is the timeline's event, value for value.
    QCOMPARE(static_cast<long long>(trace.size()),
             db_->scalar("SELECT count(*) FROM idem.trace_story('trace-incident', NULL)"));
    QCOMPARE(static_cast<long long>(trace.size()),
             storyRows() - db_->scalar("SELECT count(*) FROM idem.attempts WHERE trace_id <> "
                                       "'trace-incident'"));
    int expiries = 0;
    for (const StoryEvent& e : trace) {
      const auto same =
          std::find_if(story.events.begin(), story.events.end(),
                       [&](const StoryEvent& s) { return s.identity() == e.identity(); });
      QVERIFY2(same != story.events.end(), e.identity().c_str());
      QVERIFY2(*same == e, e.identity().c_str());
      expiries += e.kind == StoryEventKind::LeaseExpiry ? 1 : 0;
    }
    QCOMPARE(expiries, 1);
  }

  void theTimelineDrawsOneMarkPerEventInTimeOrderOnLanesPerKey() {
    TimelinePane pane(session_.get());
    pane.resize(1200, 400);
    pane.show();
    QSignalSpy shown(&pane, &TimelinePane::storyShown);
    pane.showBusinessObject(QStringLiteral("payment"), QStringLiteral("ord-incident"));
    QVERIFY(shown.wait(15000));
    TimelineView* view = pane.view();
    const BusinessObjectStory& story = view->story();
    const long long rows = storyRows();
    // 3 attempts (the LLM's retry is refused as rejected: money moved), the claim and the lease
    // expiry, 2 DEBITs.
    QCOMPARE(rows, 7LL);

    // Exactly one mark per story row, counted among the scene's items.
    int marks = 0;
    for (const QGraphicsItem* item : view->scene()->items()) {
      if (item->type() == TimelineMark::Type) ++marks;
    }
    QCOMPARE(static_cast<long long>(marks), rows);
    QCOMPARE(static_cast<long long>(view->marks().size()), rows);

    // Left to right in time; one lane (one y) per key.
    const TimelineLayout layout(story);
    QCOMPARE(view->laneYs().size(), qsizetype(2));
    QVERIFY(view->laneYs()[0] != view->laneYs()[1]);
    const QList<TimelineMark*> drawn = view->marks();
    for (int i = 0; i < drawn.size(); ++i) {
      const StoryEvent& e = story.events[static_cast<std::size_t>(drawn[i]->row())];
      QCOMPARE(drawn[i]->row(), i);
      QCOMPARE(drawn[i]->pos().y(), view->laneYs()[layout.laneOf(e)]);
      QVERIFY(!drawn[i]->toolTip().isEmpty());
      if (i == 0) continue;
      const StoryEvent& before = story.events[static_cast<std::size_t>(i - 1)];
      QVERIFY(before.at <= e.at);
      if (before.at < e.at) {
        QVERIFY2(drawn[i - 1]->pos().x() < drawn[i]->pos().x(), qPrintable(QString::number(i)));
      } else {
        QCOMPARE(drawn[i - 1]->pos().x(), drawn[i]->pos().x());
      }
    }

    // The retry is labelled by its source and the wait before it; the expiry and both charges
    // show as such.
    QStringList labels;
    for (const TimelineMark* m : drawn) labels << childText(m);
    QVERIFY2(labels.filter(QStringLiteral("llm retry")).size() == 1, qPrintable(labels.join('|')));
    QVERIFY(labels.filter(QStringLiteral("callback retry")).size() == 1);
    QVERIFY(labels.filter(QStringLiteral("lease expired")).size() == 1);
    QCOMPARE(labels.filter(QStringLiteral("DEBIT")).size(), qsizetype(2));
    QVERIFY(labels.filter(QRegularExpression(QStringLiteral("llm retry.*\\+\\d+ ms"))).size() == 1);

    // Export: a PNG that loads back at the scene's size.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("incident.png"));
    QVERIFY(pane.exportPng(path));
    QImage loaded(path);
    QVERIFY(!loaded.isNull());
    QCOMPARE(loaded.size(), view->scene()->sceneRect().size().toSize());
    QVERIFY(loaded.width() > 900 && loaded.height() > 100);
  }

  void theMainWindowShowsTheStoryOfABusinessObject() {
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    MainWindow w(o);
    w.connectTo(test::settingsFor(db_->dsn()));
    QVERIFY(w.timelinePane() != nullptr);
    QSignalSpy shown(w.timelinePane(), &TimelinePane::storyShown);
    QTRY_VERIFY_WITH_TIMEOUT(w.session()->isConnected(), 15000);
    // Selecting a record draws its business object's story.
    QTRY_VERIFY_WITH_TIMEOUT(w.recordsModel()->rowOfKey(kFirstKey) >= 0, 15000);
    QVERIFY(w.selectRecord(QString::fromLatin1(kFirstKey)));
    QTRY_VERIFY_WITH_TIMEOUT(w.timelinePane()->bizId() == "ord-incident" &&
                                 w.timelinePane()->view()->marks().size() == storyRows(),
                             15000);
    // So does the slot the audit views call.
    shown.clear();
    QMetaObject::invokeMethod(&w, "showBusinessObject", Q_ARG(QString, QStringLiteral("payment")),
                              Q_ARG(QString, QStringLiteral("ord-incident")));
    QVERIFY(shown.wait(15000));
    QCOMPARE(static_cast<long long>(w.timelinePane()->view()->marks().size()), storyRows());
  }

  // A biz_id is a writer's text: with markup in it, the timeline's header and the record's detail
  // show the characters, never what the markup would draw (a writer cannot dress up what an
  // operator reads).
  void markupInABizIdIsShownAsText() {
    const std::string spoof = "ord-<b>PAID</b><img src=x>";
    auto c = db_->connect();
    ProtocolClient client(*c);
    test::claim(client, test::paymentRequest("pay:spoof:1", spoof));
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    MainWindow w(o);
    w.connectTo(test::settingsFor(db_->dsn()));
    QTRY_VERIFY_WITH_TIMEOUT(w.session()->isConnected(), 15000);
    QSignalSpy shown(w.timelinePane(), &TimelinePane::storyShown);
    QMetaObject::invokeMethod(&w, "showBusinessObject", Q_ARG(QString, QStringLiteral("payment")),
                              Q_ARG(QString, QString::fromStdString(spoof)));
    auto* header = w.timelinePane()->findChild<QLabel*>(QStringLiteral("timelineHeader"));
    QVERIFY(header != nullptr);
    QCOMPARE(header->textFormat(), Qt::RichText);
    QVERIFY2(
        header->text().contains(QStringLiteral("ord-&lt;b&gt;PAID&lt;/b&gt;&lt;img src=x&gt;")),
        qPrintable(header->text()));
    QVERIFY(shown.wait(15000));
    QVERIFY2(header->text().contains(QStringLiteral("ord-&lt;b&gt;PAID&lt;/b&gt;")),
             qPrintable(header->text()));
    QVERIFY(!header->text().contains(QStringLiteral("<b>PAID")));
    QTRY_VERIFY_WITH_TIMEOUT(w.recordsModel()->rowOfKey("pay:spoof:1") >= 0, 15000);
    QVERIFY(w.selectRecord(QStringLiteral("pay:spoof:1")));
    QTRY_VERIFY_WITH_TIMEOUT(
        w.findChild<QLabel*>(QStringLiteral("field_business")) != nullptr &&
            w.findChild<QLabel*>(QStringLiteral("field_business"))->text().contains("PAID"),
        15000);
    auto* business = w.findChild<QLabel*>(QStringLiteral("field_business"));
    QCOMPARE(business->textFormat(), Qt::PlainText);
    QCOMPARE(business->text(), QStringLiteral("payment / ") + QString::fromStdString(spoof));
  }
};

QTEST_MAIN(TestTimeline)
#include "tst_timeline.moc"

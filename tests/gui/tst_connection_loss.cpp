// A lost connection is shown, never hangs the window, and heals: the backend is killed while the
// worker waits inside a fetch (and while idle), the status bar says "disconnected, retrying in N
// s", the tables keep their rows (and stay consistent under QAbstractItemModelTester), and after
// the reconnect everything is re-read. A server that does not answer at all leaves the GUI thread
// free.
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QtTest>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "pg_cluster.hpp"
#include "widgets/main_window.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

class TestConnectionLoss : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;
  test::AdminScenario s_;
  std::string alice_;

  std::unique_ptr<MainWindow> openWindow(const std::string& dsn) {
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);  // only the refreshes the test asks for
    o.backoff = ReconnectBackoff(300ms, 2s);
    auto w = std::make_unique<MainWindow>(o);
    w->connectTo(test::settingsFor(dsn));
    w->show();
    return w;
  }

  // The admin app's backends in this database.
  std::string adminBackends(const std::string& extra = "") {
    return "SELECT pid FROM pg_stat_activity WHERE application_name = 'idemwatch-admin' AND "
           "datname = '" +
           db_->name() + "'" + extra;
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_connection_loss");
    auto c = db_->connect();
    s_ = test::seedScenario(*c);
    alice_ = db_->createLoginRole("alice", "idem_operator");
  }

  void lossDuringAFetchIsShownAndRecovers() {
    auto w = openWindow(db_->dsnAs(alice_));
    RecordTableModel* records = w->recordsModel();
    QAbstractItemModelTester tester(records,
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY_WITH_TIMEOUT(
        w->session()->isConnected() && records->rowCount() == 7 && !records->isLoading(), 15000);

    // Hold the table so the next fetch waits inside the server, then kill the waiting backend.
    auto holder = db_->connect();
    pqxx::work lock(*holder);
    lock.exec("LOCK TABLE idem.records IN ACCESS EXCLUSIVE MODE");
    w->refreshNow();
    QVERIFY(test::waitUntil([&] {
      return db_->scalar("SELECT count(*) FROM (" + adminBackends(" AND wait_event_type = 'Lock'") +
                         ") t") == 1;
    }));
    QVERIFY(records->isLoading());
    db_->exec("SELECT pg_terminate_backend(pid) FROM (" + adminBackends() + ") t");
    lock.commit();

    QTRY_VERIFY2_WITH_TIMEOUT(
        w->connectionStatusText().contains(QStringLiteral("disconnected, retrying in")),
        qPrintable(w->connectionStatusText()), 10000);
    QCOMPARE(records->rowCount(), 7);  // the last rows stay on screen
    QVERIFY(!records->isLoading());
    QVERIFY(!records->lastError().isEmpty());
    QVERIFY(!w->settleAction()->isEnabled());

    // Meanwhile the world moves on; after the reconnect the window catches up by itself.
    ProtocolClient(*holder).begin(test::paymentRequest("during-outage", "ord-during-outage"));
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->isConnected(), 15000);
    QTRY_VERIFY_WITH_TIMEOUT(records->rowOfKey("during-outage") >= 0, 10000);
    QVERIFY(w->connectionStatusText().contains(QStringLiteral("connected as")));
    QVERIFY(records->lastError().isEmpty());
  }

  void lossWhileIdleIsNoticedAtTheNextFetch() {
    auto w = openWindow(db_->dsnAs(alice_));
    RecordTableModel* attention = w->attentionModel();
    QAbstractItemModelTester tester(attention,
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->isConnected() && attention->rowCount() == 4, 15000);
    db_->exec("SELECT pg_terminate_backend(pid) FROM (" + adminBackends() + ") t");
    QVERIFY(test::waitUntil(
        [&] { return db_->scalar("SELECT count(*) FROM (" + adminBackends() + ") t") == 0; }));

    w->refreshNow();
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->state() == ConnectionState::Disconnected ||
                                 w->connectionStatusText().contains(QStringLiteral("disconnected")),
                             10000);
    QCOMPARE(attention->rowCount(), 4);
    QTRY_VERIFY_WITH_TIMEOUT(w->session()->isConnected(), 15000);
    QTRY_VERIFY(!attention->isLoading() && attention->lastError().isEmpty());
    QCOMPARE(attention->rowCount(), 4);
  }

  void unreachableServerNeverBlocksTheGuiThread() {
    const int port = test::freePort();
    auto w =
        openWindow("host=127.0.0.1 port=" + std::to_string(port) + " dbname=nowhere user=nobody");
    // A timer on the GUI thread: its longest gap is how long the event loop was ever blocked.
    QElapsedTimer clock;
    qint64 last = 0;
    qint64 longest = 0;
    QTimer tick;
    tick.setInterval(5);
    clock.start();
    connect(&tick, &QTimer::timeout, [&] {
      longest = std::max(longest, clock.elapsed() - last);
      last = clock.elapsed();
    });
    tick.start();
    QTRY_VERIFY2_WITH_TIMEOUT(
        w->connectionStatusText().contains(QStringLiteral("disconnected, retrying in")),
        qPrintable(w->connectionStatusText()), 10000);
    QVERIFY(w->connectionStatusText().contains(QStringLiteral("refused")) ||
            w->connectionStatusText().contains(QStringLiteral("connect")));
    // Several attempts later (the backoff grows), the window was never stuck.
    QTest::qWait(1500);
    QVERIFY2(longest < 200,
             qPrintable(QStringLiteral("GUI thread blocked for %1 ms").arg(longest)));
    QCOMPARE(w->recordsModel()->rowCount(), 0);
    QVERIFY(!w->settleAction()->isEnabled());
  }
};

QTEST_MAIN(TestConnectionLoss)
#include "tst_connection_loss.moc"

// A lost connection is shown, never hangs the window, and heals: the backend is killed while the
// worker waits inside a fetch (and while idle), the status bar says "disconnected, retrying in N
// s", the tables keep their rows (and stay consistent under QAbstractItemModelTester), and after
// the reconnect everything is re-read. A server that does not answer at all leaves the GUI thread
// free. A settle in flight when the connection breaks (a failover) ends, once the database answers
// again, as what the record says: written, or "not written, settle again".
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTcpSocket>
#include <QtTest>
#include <mutex>

#include "admin_fixture.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "models/selected_record.hpp"
#include "pg_cluster.hpp"
#include "widgets/main_window.hpp"
#include "widgets/settle_dialog.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

// A relay between the app and the test server on 127.0.0.1, on a thread of its own as the network
// is (the app's GUI thread may wait for its database thread, which waits for the network). Armed
// with two markers, it lets the server's next answer carrying the first pass, then drops the next
// one carrying the second (the answer to the COMMIT that follows) and cuts both connections: the
// answer lost after the commit, as a failover or a reset loses it.
class AnswerDropper {
 public:
  explicit AnswerDropper(int serverPort) {
    QSemaphore listening;
    thread_.reset(QThread::create([this, serverPort, &listening] {
      QTcpServer server;
      server.listen(QHostAddress::LocalHost, 0);
      port_ = server.serverPort();
      QObject::connect(&server, &QTcpServer::newConnection, [this, &server, serverPort] {
        while (QTcpSocket* app = server.nextPendingConnection()) relay(app, serverPort);
      });
      listening.release();
      QEventLoop loop;
      loop.exec();
    }));
    thread_->start();
    listening.acquire();
  }
  ~AnswerDropper() {
    thread_->quit();
    thread_->wait();
  }
  int port() const { return port_; }
  void arm(const QByteArray& first, const QByteArray& then) {
    std::lock_guard lock(mutex_);
    first_ = first;
    marker_ = then;
  }
  int dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  // Whether this answer from the server is the one to lose.
  bool drops(const QByteArray& answer) {
    std::lock_guard lock(mutex_);
    if (!first_.isEmpty()) {
      if (answer.contains(first_)) first_.clear();
      return false;
    }
    if (marker_.isEmpty() || !answer.contains(marker_)) return false;
    marker_.clear();
    ++dropped_;
    return true;
  }

  void relay(QTcpSocket* app, int serverPort) {
    auto* db = new QTcpSocket(app);
    db->connectToHost(QHostAddress::LocalHost, static_cast<quint16>(serverPort));
    QObject::connect(app, &QTcpSocket::readyRead, db, [app, db] { db->write(app->readAll()); });
    QObject::connect(db, &QTcpSocket::readyRead, app, [this, app, db] {
      const QByteArray answer = db->readAll();
      if (drops(answer)) {
        db->abort();
        app->abort();
        return;
      }
      app->write(answer);
    });
    QObject::connect(db, &QTcpSocket::disconnected, app, &QTcpSocket::disconnectFromHost);
    QObject::connect(app, &QTcpSocket::disconnected, app, &QObject::deleteLater);
  }

  std::unique_ptr<QThread> thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  QByteArray first_;
  QByteArray marker_;
  int dropped_ = 0;
};

template <typename W>
W* child(QObject* parent, const char* name) {
  return parent->findChild<W*>(QString::fromLatin1(name));
}

}  // namespace

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

  // The settle dialog on a stuck record with a decision filled in and weighed; null when a step
  // does not happen.
  static SettleDialog* decide(MainWindow& w, const std::string& key, const QString& reason) {
    if (!test::waitUntil([&] {
          return w.session()->isConnected() && !w.attentionModel()->isLoading() &&
                 w.attentionModel()->rowCount() > 0;
        })) {
      return nullptr;
    }
    w.showAttention();
    if (!w.selectRecord(QString::fromStdString(key)) || !test::waitUntil([&] {
          return w.selectedRecord()->record() &&
                 w.selectedRecord()->record()->idempotencyKey == key &&
                 w.settleAction()->isEnabled();
        })) {
      return nullptr;
    }
    SettleDialog* d = w.openSettleDialog();
    if (!d) return nullptr;
    QSignalSpy assessed(d, &SettleDialog::assessed);
    d->chooseTarget(RecordStatus::Failed);
    child<QPlainTextEdit>(d, "settleReason")->setPlainText(reason);
    return test::waitUntil([&] { return assessed.count() == 1; }) ? d : nullptr;
  }

  std::string statusOf(const std::string& key) {
    return test::textBySql(*db_,
                           "SELECT status || ' v' || version FROM idem.records WHERE "
                           "idempotency_key = '" +
                               key + "'");
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

  // The connection breaks before the settle commits (its backend killed while it waits for a
  // lock): once reconnected, the dialog says nothing was written, and the same decision then
  // settles the record, once.
  void settleCutBeforeItCommitsSaysNotWritten() {
    auto w = openWindow(db_->dsnAs(alice_));
    const std::string before = statusOf(s_.unknown);
    SettleDialog* d = decide(*w, s_.unknown, QStringLiteral("no charge in the gateway's records"));
    QVERIFY(d);
    auto holder = db_->connect();
    pqxx::work lock(*holder);
    lock.exec("LOCK TABLE idem.records IN ACCESS EXCLUSIVE MODE");
    QTest::mouseClick(child<QPushButton>(d, "settleButton"), Qt::LeftButton);
    QVERIFY(test::waitUntil([&] {
      return db_->scalar("SELECT count(*) FROM (" + adminBackends(" AND wait_event_type = 'Lock'") +
                         ") t") == 1;
    }));
    db_->exec("SELECT pg_terminate_backend(pid) FROM (" + adminBackends() + ") t");
    lock.commit();

    QTRY_VERIFY2_WITH_TIMEOUT(
        d->phase() == SettleDialog::Phase::Editing &&
            d->message().startsWith(QStringLiteral("Not written: the connection")),
        qPrintable(d->message()), 20000);
    QCOMPARE(statusOf(s_.unknown), before);
    QTest::mouseClick(child<QPushButton>(d, "settleButton"), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(statusOf(s_.unknown).starts_with("FAILED"), 10000);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = '" +
                         s_.unknown + "' AND actor_kind = 'operator'"),
             1LL);
  }

  // The settle commits and its answer is lost on the wire: once reconnected, the dialog finds the
  // settle in the record and says it was written; nothing is written twice.
  void settleWhoseAnswerIsLostSaysWritten() {
    const std::string dsn = db_->dsnAs(alice_);
    const auto portAt = dsn.find("port=");
    QVERIFY(portAt != std::string::npos);
    AnswerDropper wire(std::stoi(dsn.substr(portAt + 5)));
    auto w = openWindow("host=127.0.0.1 port=" + std::to_string(wire.port()) +
                        " dbname=" + db_->name() + " user=" + alice_);
    SettleDialog* d = decide(*w, s_.processingExpired, QStringLiteral("the agent crashed first"));
    QVERIFY(d);
    // The settle's answer, its result field "ok" as the protocol's DataRow carries it (a 4-byte
    // length, then the text; no read before it has a field that is "ok"), passes; the answer to
    // the COMMIT after it is lost.
    wire.arm(QByteArray("\0\0\0\2ok", 6), QByteArray("COMMIT"));
    std::optional<idem::SettleOutcome> outcome;
    connect(d, &SettleDialog::recordSettled, this,
            [&outcome](const QString&, const idem::SettleOutcome& o) { outcome = o; });
    QTest::mouseClick(child<QPushButton>(d, "settleButton"), Qt::LeftButton);
    QPointer<SettleDialog> open(d);
    QTRY_VERIFY2_WITH_TIMEOUT(outcome.has_value(), qPrintable(open ? open->message() : QString()),
                              20000);
    QCOMPARE(wire.dropped(), 1);
    QVERIFY(outcome->verdict == idem::SettleVerdict(ResultCode::Ok));
    QVERIFY2(outcome->message.find("the record shows the settle written") != std::string::npos,
             outcome->message.c_str());
    QVERIFY(statusOf(s_.processingExpired).starts_with("FAILED"));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = '" +
                         s_.processingExpired + "' AND actor_kind = 'operator'"),
             1LL);
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

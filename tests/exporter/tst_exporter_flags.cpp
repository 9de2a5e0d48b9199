// The command line: durations in the Prometheus style, every bad flag or value a one-line error
// that names it with exit code 2, a DSN libpq cannot parse refused at start, an unreadable web
// config refused at start, and an unreachable database served as db_up 0, not a crash.
#include <QProcess>
#include <QTcpServer>
#include <QtTest>

#include "exporter_harness.hpp"
#include "exporter_options.hpp"
#include "idem/duration.hpp"
#include "pg_cluster.hpp"

using namespace idem;
using namespace idem::exporter;
using std::chrono::milliseconds;

namespace {

struct Run {
  int exitCode = -1;
  QString stdErr;
  QString stdOut;
};

Run runBinary(const QStringList& args) {
  QProcess p;
  p.start(test::exporterBinary(), args);
  Run r;
  if (!p.waitForStarted(10000)) {
    r.stdErr = QStringLiteral("did not start: ") + test::exporterBinary();
    return r;
  }
  if (!p.waitForFinished(10000)) {
    p.kill();
    p.waitForFinished();
    r.stdErr = QStringLiteral("still running after 10 s");
    return r;
  }
  r.exitCode = p.exitCode();
  r.stdErr = QString::fromUtf8(p.readAllStandardError());
  r.stdOut = QString::fromUtf8(p.readAllStandardOutput());
  return r;
}

std::string usageError(const std::vector<std::string>& args) {
  try {
    parseCommandLine(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestExporterFlags : public QObject {
  Q_OBJECT

 private slots:
  void durationsFollowPrometheus() {
    QCOMPARE(parseDuration("5s"), std::optional(milliseconds(5000)));
    QCOMPARE(parseDuration("1m30s"), std::optional(milliseconds(90000)));
    QCOMPARE(parseDuration("24h"), std::optional(milliseconds(86400000)));
    QCOMPARE(parseDuration("500ms"), std::optional(milliseconds(500)));
    QCOMPARE(parseDuration("0"), std::optional(milliseconds(0)));
    QCOMPARE(parseDuration("1d"), std::optional(milliseconds(86400000)));
    QCOMPARE(parseDuration("5"), std::nullopt);
    QCOMPARE(parseDuration("5x"), std::nullopt);
    QCOMPARE(parseDuration("30s1m"), std::nullopt);  // largest unit first
    QCOMPARE(parseDuration("-5s"), std::nullopt);
    QCOMPARE(parseDuration(""), std::nullopt);
    QCOMPARE(formatDuration(milliseconds(300000)), std::string("5m"));
    QCOMPARE(formatDuration(milliseconds(90500)), std::string("1m30s500ms"));
  }

  void flagsHaveTheirDefaultsAndBothSpellings() {
    const CommandLine d = parseCommandLine({});
    QCOMPARE(d.options.listenAddress, std::string(":9477"));
    QCOMPARE(d.options.telemetryPath, std::string("/metrics"));
    QCOMPARE(d.options.collectInterval, milliseconds(5000));
    QCOMPARE(d.options.ratioWindow, milliseconds(300000));
    QCOMPARE(d.options.reconcileWindow, milliseconds(86400000));
    QCOMPARE(d.options.reconcileGrace, milliseconds(300000));
    QCOMPARE(d.options.reconcileBizTypes, std::vector<std::string>{"payment"});
    const CommandLine c =
        parseCommandLine({"--collect-interval=1s", "--ratio-window", "1h", "--reconcile-biz-types",
                          "payment, refund", "--db.dsn", "dbname=x"});
    QCOMPARE(c.options.collectInterval, milliseconds(1000));
    QCOMPARE(c.options.ratioWindow, milliseconds(3600000));
    QCOMPARE(c.options.reconcileBizTypes, (std::vector<std::string>{"payment", "refund"}));
    QCOMPARE(c.options.dbDsn, std::optional<std::string>("dbname=x"));
    QCOMPARE(civetwebListeningPort(":9477"), std::string("9477"));
    QCOMPARE(civetwebListeningPort("localhost:9"), std::string("127.0.0.1:9"));
    QCOMPARE(civetwebListeningPort("[::1]:9477"), std::string("[::1]:9477"));
  }

  void badFlagsAreNamed() {
    QVERIFY(usageError({"--nope"}).find("unknown flag --nope") != std::string::npos);
    QVERIFY(usageError({"--collect-interval", "5x"})
                .find("--collect-interval: \"5x\" is not a duration") != std::string::npos);
    QVERIFY(usageError({"--collect-interval=10ms"}).find("too short") != std::string::npos);
    QVERIFY(usageError({"--log.level=loud"}).find("--log.level") != std::string::npos);
    QVERIFY(usageError({"--web.listen-address=9477"}).find("needs a port") != std::string::npos);
    QVERIFY(usageError({"--web.listen-address=example.com:9477"}).find("must be an IP address") !=
            std::string::npos);
    QVERIFY(usageError({"--web.listen-address=:99999"}).find("not a port number") !=
            std::string::npos);
    QVERIFY(usageError({"--web.telemetry-path=metrics"}).find("--web.telemetry-path") !=
            std::string::npos);
    QVERIFY(usageError({"--reconcile-biz-types=payment,,x"}).find("empty item") !=
            std::string::npos);
    QVERIFY(
        usageError({"--reconcile-grace=1h", "--reconcile-window=30m"}).find("must be shorter") !=
        std::string::npos);
    QVERIFY(usageError({"--max-tracked-gaps=lots"}).find("--max-tracked-gaps") !=
            std::string::npos);
    QVERIFY(usageError({"--max-biz-types=0"}).find("--max-biz-types: \"0\" is not a number") !=
            std::string::npos);
    QVERIFY(usageError({"--db.dsn"}).find("--db.dsn needs a value") != std::string::npos);
  }

  void binaryReportsBadFlagsOnOneLineWithExitCode2() {
    for (const QStringList& args : {QStringList{"--nope"}, QStringList{"--ratio-window=soon"},
                                    QStringList{"--log.level", "verbose"}}) {
      const Run r = runBinary(args);
      QCOMPARE(r.exitCode, 2);
      QVERIFY2(r.stdErr.startsWith("idemwatch-exporter: "), qPrintable(r.stdErr));
      QCOMPARE(r.stdErr.count('\n'), 1);
      QVERIFY2(r.stdErr.contains(args.first().section('=', 0, 0)), qPrintable(r.stdErr));
    }
    const Run version = runBinary({"--version"});
    QCOMPARE(version.exitCode, 0);
    QVERIFY(version.stdOut.contains(IDEMWATCH_VERSION));
    QVERIFY(version.stdOut.contains("revision"));
  }

  void binaryRefusesADsnLibpqCannotParse() {
    const Run r = runBinary({"--db.dsn", "host=localhost port", "--web.listen-address",
                             QStringLiteral("127.0.0.1:%1").arg(test::freePort())});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.stdErr.contains("--db.dsn") && r.stdErr.contains("is not valid"),
             qPrintable(r.stdErr));
  }

  void binaryRefusesAnUnreadableWebConfig() {
    const Run r =
        runBinary({"--web.config.file", "/nonexistent/web.yml", "--db.dsn", "dbname=x",
                   "--web.listen-address", QStringLiteral("127.0.0.1:%1").arg(test::freePort())});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.stdErr.contains("/nonexistent/web.yml: cannot be read"), qPrintable(r.stdErr));
    QCOMPARE(r.stdErr.count('\n'), 1);
  }

  void binaryRefusesAPortInUse() {
    const int port = test::freePort();
    QTcpServer blocker;
    QVERIFY(blocker.listen(QHostAddress::LocalHost, static_cast<quint16>(port)));
    const Run r = runBinary(
        {"--db.dsn", "dbname=x", "--web.listen-address", QStringLiteral("127.0.0.1:%1").arg(port)});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.stdErr.contains(QStringLiteral("cannot serve on 127.0.0.1:%1").arg(port)),
             qPrintable(r.stdErr));
  }

  void unreachableDatabaseIsServedAsDbUpZero() {
    const int dbPort = test::freePort();  // nobody listens there
    const int port = test::freePort();
    QProcess p;
    p.start(test::exporterBinary(),
            {"--db.dsn",
             QStringLiteral("host=127.0.0.1 port=%1 dbname=x connect_timeout=1").arg(dbPort),
             "--web.listen-address", QStringLiteral("127.0.0.1:%1").arg(port)});
    QVERIFY(p.waitForStarted());
    const QString url = QStringLiteral("http://127.0.0.1:%1/metrics").arg(port);
    QVERIFY(test::waitUntil(
        [&] {
          const test::HttpAnswer a = test::httpGet({url, {}, {}, std::chrono::milliseconds(2000)});
          const test::Series s = test::parseMetrics(a.body);
          return a.status == 200 &&
                 test::value(s, "idempotency_exporter_db_up") == std::optional(0.0) &&
                 test::value(s, "idempotency_exporter_collect_errors_total{stage=\"connect\"}") >=
                     std::optional(1.0);
        },
        std::chrono::seconds(20)));
    QCOMPARE(p.state(), QProcess::Running);
    p.terminate();  // SIGTERM: a clean stop
    QVERIFY(p.waitForFinished(10000));
    QCOMPARE(p.exitCode(), 0);
    const QString log = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(log.contains("level=error") && log.contains("cannot connect"), qPrintable(log));
  }
};

QTEST_GUILESS_MAIN(TestExporterFlags)
#include "tst_exporter_flags.moc"

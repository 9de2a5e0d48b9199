// The command line: durations in the Prometheus style, every bad flag or value a one-line error
// that names it with exit code 2, a flag given twice refused, the collectors registered with
// their --collector.NAME switches, a DSN libpq cannot parse refused at start, an unreadable web
// config refused at start, and an unreachable database served as db_up 0, not a crash.
#include <QProcess>
#include <QTcpServer>
#include <QtTest>
#include <set>

#include "collectors/collector_list.hpp"
#include "collectors/registry.hpp"
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
    parseOptions(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A collector that only this test registers: one file's worth of code, with a flag of its own
// kept in ExporterOptions::settings<T>(), and nothing else edited anywhere.
struct ProbeSettings {
  milliseconds every{7000};
};

class ProbeCollector : public Collector {
 public:
  explicit ProbeCollector(ProbeSettings s) : settings_(s) {}
  std::string_view name() const override { return "probe"; }
  std::chrono::milliseconds interval() const override { return settings_.every; }
  void update(pqxx::connection&) override {}
  void collect(std::vector<prometheus::MetricFamily>& out) const override {
    prometheus::MetricFamily f;
    f.name = "idempotency_test_probe";
    out.push_back(f);
  }

 private:
  ProbeSettings settings_;
};

[[maybe_unused]] const bool probeRegistered = registerCollector({
    .name = "probe",
    .enabledByDefault = false,
    .order = 1000,
    .declareFlags =
        [](CommandLine& cli, ExporterOptions& o) {
          cli.duration("probe-every", "how often the probe runs", o.settings<ProbeSettings>().every,
                       milliseconds(1000));
        },
    .make = [](const CollectorContext& c) -> std::unique_ptr<Collector> {
      return std::make_unique<ProbeCollector>(c.options.settings<ProbeSettings>());
    },
});

std::set<std::string> familyNames(const ExporterOptions& options) {
  std::set<std::string> names;
  for (const auto& f : CollectorSet(options).Collect()) names.insert(f.name);
  return names;
}

bool hasStage(const ExporterOptions& options, const std::string& stage) {
  for (const auto& f : CollectorSet(options).Collect()) {
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "stage" && l.value == stage) return true;
      }
    }
  }
  return false;
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
    const ExporterOptions d = parseOptions({});
    QCOMPARE(d.listenAddress, std::string(":9477"));
    QCOMPARE(d.telemetryPath, std::string("/metrics"));
    QCOMPARE(d.collectInterval, milliseconds(5000));
    QCOMPARE(d.ratioWindow, milliseconds(300000));
    QCOMPARE(d.reconcileWindow, milliseconds(86400000));
    QCOMPARE(d.reconcileGrace, milliseconds(300000));
    QCOMPARE(d.reconcileBizTypes, std::vector<std::string>{"payment"});
    QCOMPARE(d.standbyStatementBound, milliseconds(60000));
    QCOMPARE(parseOptions({"--standby.statement-bound=5m"}).standbyStatementBound,
             milliseconds(300000));
    const ExporterOptions c =
        parseOptions({"--collect-interval=1s", "--ratio-window", "1h", "--reconcile-biz-types",
                      "payment, refund", "--db.dsn", "dbname=x"});
    QCOMPARE(c.collectInterval, milliseconds(1000));
    QCOMPARE(c.ratioWindow, milliseconds(3600000));
    QCOMPARE(c.reconcileBizTypes, (std::vector<std::string>{"payment", "refund"}));
    QCOMPARE(c.dbDsn, std::optional<std::string>("dbname=x"));
    QCOMPARE(parseListenAddress(":9477").host, std::string());
    QCOMPARE(parseListenAddress(":9477").port, 9477);
    QCOMPARE(parseListenAddress("localhost:9").host, std::string("127.0.0.1"));
    QCOMPARE(parseListenAddress("[::1]:9477").host, std::string("::1"));
  }

  void badFlagsAreNamed() {
    QVERIFY(usageError({"--nope"}).find("unknown flag --nope") != std::string::npos);
    QCOMPARE(usageError({"--collect-interval", "5x"}),
             std::string("--collect-interval must be a duration such as 500ms, 5s, 1m or 24h, got "
                         "'5x'"));
    QCOMPARE(usageError({"--collect-interval=10ms"}),
             std::string("--collect-interval must be at least 100ms, got 10ms"));
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
    QVERIFY(usageError({"--standby.statement-bound=10ms"}).find("--standby.statement-bound") !=
            std::string::npos);
    QCOMPARE(usageError({"--max-biz-types=0"}),
             std::string("--max-biz-types must be between 1 and 100000, got 0"));
    QVERIFY(usageError({"--db.dsn"}).find("--db.dsn needs a value") != std::string::npos);
    QCOMPARE(usageError({"extra"}), std::string("unexpected argument 'extra'"));
  }

  // The exporter used to take the last of two; every program now refuses the second.
  void aFlagGivenTwiceIsRefused() {
    QCOMPARE(usageError({"--collect-interval=1s", "--collect-interval", "2s"}),
             std::string("--collect-interval is given twice"));
    QCOMPARE(usageError({"--no-collector.fund_flows", "--no-collector.fund_flows"}),
             std::string("--no-collector.fund_flows is given twice"));
    QCOMPARE(usageError({"--collector.fund_flows", "--no-collector.fund_flows"}),
             std::string("--collector.fund_flows and --no-collector.fund_flows contradict each "
                         "other"));
  }

  void collectorsRegisterThemselves() {
    std::vector<std::string> names;
    for (const CollectorRegistration* r : registeredCollectors()) names.push_back(r->name);
    QCOMPARE(names,
             (std::vector<std::string>{"unsettled_records", "requests", "fund_flows", "transitions",
                                       "reconciliation", "overcharges", "gateway_evidence",
                                       "history_partitions", "durability", "probe"}));
  }

  void noCollectorRemovesItsFamiliesFromTheScrape() {
    const std::set<std::string> all = familyNames(parseOptions({}));
    QVERIFY(all.contains("idempotency_fund_flows_total"));
    QVERIFY(all.contains("idempotency_duplicate_fund_flow_ratio"));
    QVERIFY(hasStage(parseOptions({}), "fund_flows"));
    const ExporterOptions off = parseOptions({"--no-collector.fund_flows"});
    const std::set<std::string> without = familyNames(off);
    QVERIFY(!without.contains("idempotency_fund_flows_total"));
    QVERIFY(!without.contains("idempotency_duplicate_fund_flows_total"));
    QVERIFY(!without.contains("idempotency_duplicate_fund_flow_ratio"));
    QVERIFY(!hasStage(off, "fund_flows"));
    QVERIFY(without.contains("idempotency_requests_total"));  // the others stay
    QVERIFY(without.contains("idempotency_exporter_db_up"));  // self-health is always on
  }

  // A collector off by default runs with --collector.NAME, its own flag parsed and validated.
  void aNewCollectorIsOneFile() {
    QVERIFY(!familyNames(parseOptions({})).contains("idempotency_test_probe"));
    const ExporterOptions on = parseOptions({"--collector.probe", "--probe-every=30s"});
    QCOMPARE(on.settings<ProbeSettings>().every, milliseconds(30000));
    QVERIFY(familyNames(on).contains("idempotency_test_probe"));
    QVERIFY(hasStage(on, "probe"));
    QCOMPARE(usageError({"--probe-every=10ms"}),
             std::string("--probe-every must be at least 1s, got 10ms"));
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
    const Run twice = runBinary({"--web.listen-address=:1", "--web.listen-address=:2"});
    QCOMPARE(twice.exitCode, 2);
    QCOMPARE(twice.stdErr,
             QStringLiteral("idemwatch-exporter: --web.listen-address is given twice\n"));
    const Run help = runBinary({"--help"});
    QCOMPARE(help.exitCode, 0);
    for (const char* line : {"--web.listen-address=ADDR", "(default :9477)", "--reconcile-grace",
                             "--collector.fund_flows", "--no-collector.overcharges", "--version"}) {
      QVERIFY2(help.stdOut.contains(line), line);
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

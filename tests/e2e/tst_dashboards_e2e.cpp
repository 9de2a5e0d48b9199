// End to end for the dashboards, alerts and runbooks. Real parts only: the
// idemwatch-exporter binary reads a real PostgreSQL that the simulator fills with steady agent
// traffic, and a real Prometheus scrapes it every second and loads the shipped rules
// (dashboards/rules/*.rules.yml). Then:
// - every query of both dashboards, its variables filled in by the linter as Grafana would fill
//   them, returns data through Prometheus' HTTP API;
// - the recording rules reproduce the exporter's own ratio gauges on the same traffic;
// - the money alerts fire on the traffic's faults (duplicate charges, debits without SUCCESS).
//
// The suite fails, never skips, when Prometheus is missing (Debian: apt-get install prometheus).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkProxy>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "e2e_support.hpp"
#include "pg_cluster.hpp"
#include "simulator.hpp"
#include "template_vars.hpp"
#include "test_database.hpp"
#include "test_traffic.hpp"

using namespace idem;
using namespace idem::e2e;
using namespace std::chrono_literals;

namespace {

// What the dashboards' $__rate_interval is for 1s scrapes: Grafana takes at least four scrape
// intervals; 15 leaves room for a late scrape and still fills quickly.
const QString kRateInterval = QStringLiteral("15s");
// The alerts select job="idemwatch" (dashboards/rules/alerts.rules.yml).
const QString kJob = QStringLiteral("idemwatch");
const QStringList kRetrySourceLabels{"llm", "framework", "http", "callback"};

// The exporter's ratio window, the same as the recording rules' 5m windows.
const QString kRatioWindow = QStringLiteral("5m");
// How much scraped traffic the ratio comparison waits for behind a rule evaluation.
constexpr double kComparedSeconds = 60;

// The recording rules and the exporter's gauges estimate the same proportions of the same
// stationary traffic, but not over exactly the same rows:
// - the exporter's window also holds the few seconds of traffic before Prometheus' first scrape
//   (its window is 5m of rows by created_at; rate() only sees increases between scrapes);
// - rate() extrapolates each series by up to half a scrape interval at the window's start, less
//   for a series that was still 0 there, and to the window's end from the last scrape (<= 1s);
// - the exporter buckets rows by created_at, the counters by the collection that read them.
// With ~60 requests and ~25 fund flows a second over >= 60s, all of that moves a ratio by a few
// thousandths (the extra seconds weigh ~5% of the rows; 0.5s of 60s is under 1%); the largest
// difference seen in repeated runs, also on a loaded machine, was 0.0025. 0.01 is four times that,
// and less than half the gap between any two sources' retry ratios (>= 0.03 with the rates of
// trafficConfig), so a gauge published under the wrong source, or a hit ratio leaving out
// in_progress (~0.06 here), cannot pass.
constexpr double kRatioTolerance = 0.01;

// Steady, throttled traffic of the three biz types with every case the dashboards and alerts
// watch: retries from each source (at distinct rates), lost responses (UNKNOWN), crashes past a
// short lease (stuck PROCESSING), concurrent copies (in_progress), a buggy downstream charging
// twice (duplicate fund flows), and, at intervals long enough that stuck records and debits
// without SUCCESS are always there between the rounds, the reconciler (idem.reconcile) and an
// operator settling stuck records (schema v2's actor kinds). Runs until stopped.
sim::SimulationConfig trafficConfig(const test::TestDatabase& db) {
  sim::SimulationConfig c = test::testTraffic(db, 2024, "e2e", 0);
  c.operationsPerSecond = 40;
  c.bizTypes = {"payment", "refund", "coupon"};
  c.responseLossRate = 0.05;
  c.crashRate = 0.02;
  c.lease = 1000ms;
  c.expireLeasesEvery = 0ms;  // stuck records stay stuck, for the stuck-records panels
  c.reconcileEvery = 20s;
  c.settleEvery = 30s;
  c.doubleChargeRate = 0.05;
  // Retry rates far enough apart that the sources' ratios differ by more than 2 x the tolerance
  // (declines add framework re-runs on top of frameworkRetryRate).
  c.llmRetryRate = 0.20;
  c.httpRetryRate = 0.12;
  c.callbackRate = 0.07;
  c.frameworkRetryRate = 0.01;
  return c;
}

}  // namespace

class TestDashboardsE2e : public QObject {
  Q_OBJECT

  SuiteEnvironment env_;
  QTemporaryDir workDir_;
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<ChildProcess> exporter_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::unique_ptr<PrometheusApi> api_;
  QNetworkAccessManager nam_;
  int exporterPort_ = 0;
  int prometheusPort_ = 0;
  double scrapedSince_ = 0;  // when Prometheus held its first sample of the exporter

  BackgroundTraffic traffic_;

  QString instance() const { return QStringLiteral("127.0.0.1:%1").arg(exporterPort_); }

  // Empty while the simulator runs, else what went wrong with it.
  QString trafficProblem() { return traffic_.problem(); }

  // Everything the suite started, stopped in dependency order; safe to call twice.
  void shutDown() {
    traffic_.stop();
    prometheus_.reset();
    exporter_.reset();
    db_.reset();
  }

  QString startExporter() {
    exporterPort_ = test::freePort();
    exporter_ =
        std::make_unique<ChildProcess>("idemwatch-exporter", workDir_.filePath("exporter.log"));
    return e2e::startExporter(*exporter_, env_.binaryDir, db_->dsn(), instance(),
                              {"--ratio-window=" + kRatioWindow,
                               // Reconciliation soon after a debit, so that
                               // IdempotencyDebitWithoutSuccess can fire within the test (the
                               // default grace is 5m).
                               "--reconcile-interval=5s", "--reconcile-grace=5s"},
                              nam_);
  }

  void startTraffic() { traffic_.start(trafficConfig(*db_)); }

  // A biz_type's series appear with its first row. Prometheus starts scraping only once all three
  // exist, so that every series is there from its first scrape and rate() sees whole windows
  // (the first increment of a series born mid-window is invisible to rate()).
  QString waitForEverySeries() {
    const QUrl url(QStringLiteral("http://%1/metrics").arg(instance()));
    const bool all = QTest::qWaitFor(
        [&] {
          if (!trafficProblem().isEmpty()) return true;
          const QByteArray body = httpRequest(nam_, url, std::nullopt, 2s).body;
          for (const char* biz : {"payment", "refund", "coupon"}) {
            if (!body.contains(QByteArray("idempotency_requests_total{biz_type=\"") + biz))
              return false;
          }
          return true;
        },
        60'000);
    if (!trafficProblem().isEmpty()) return trafficProblem();
    if (!all)
      return "the exporter did not publish the series of all three biz types within 60s; " +
             exporter_->describe();
    return {};
  }

  QString startPrometheus(const QString& program) {
    const QString config = workDir_.filePath("prometheus.yml");
    if (QString error = writePrometheusConfig(config, env_.sourceDir, kJob, {instance()});
        !error.isEmpty())
      return error;
    prometheusPort_ = test::freePort();
    prometheus_ = std::make_unique<ChildProcess>("prometheus", workDir_.filePath("prometheus.log"));
    api_ = std::make_unique<PrometheusApi>(prometheusPort_);
    return e2e::startPrometheus(*prometheus_, *api_, program, config, workDir_.path(),
                                prometheusPort_, kJob, 1, scrapedSince_);
  }

  // The dashboards of the exporter's figures. The proxy's dashboard reads the proxy's own
  // /metrics, which this suite does not run: tests/proxy runs its queries against a proxy.
  static QStringList exporterDashboardFiles(const QDir& dir) {
    QStringList files = dir.entryList({"*.json"}, QDir::Files, QDir::Name);
    files.removeAll(QStringLiteral("idemwatch-proxy.json"));
    return files;
  }

  // The two dashboards, parsed.
  std::vector<std::pair<QString, QJsonObject>> dashboards() const {
    const QDir dir(env_.sourceDir + "/dashboards/grafana/dashboards");
    std::vector<std::pair<QString, QJsonObject>> out;
    for (const QString& f : exporterDashboardFiles(dir)) {
      QFile file(dir.absoluteFilePath(f));
      if (file.open(QIODevice::ReadOnly))
        out.emplace_back(f, QJsonDocument::fromJson(file.readAll()).object());
    }
    return out;
  }

  // The values the suite gives the dashboards' variables, as --print-exprs gets them.
  std::map<std::string, std::string> variableValues() const {
    return {{"job", kJob.toStdString()},
            {"instance", instance().toStdString()},
            {"__rate_interval", kRateInterval.toStdString()}};
  }

  // Query text with the variables filled in; `unset` names any variable without a value.
  QString fillIn(const QString& text, QString& unset) const {
    std::set<std::string> missing;
    const std::string filled =
        idemwatch::dashlint::substituteVariables(text.toStdString(), variableValues(), missing);
    unset.clear();
    for (const std::string& m : missing) unset += QString::fromStdString("$" + m + " ");
    return QString::fromStdString(idemwatch::dashlint::toOneLine(filled));
  }

  // The alert `name` in state firing, polled until the deadline.
  std::optional<QJsonObject> waitForFiringAlert(const QString& name, int deadlineMs,
                                                QString& error) {
    std::optional<QJsonObject> found;
    const bool fired = QTest::qWaitFor(
        [&] {
          const QJsonArray alerts = api_->alerts(error);
          for (const auto& v : alerts) {
            const QJsonObject alert = v.toObject();
            if (alert.value("labels").toObject().value("alertname").toString() == name &&
                alert.value("state").toString() == QLatin1String("firing")) {
              found = alert;
              return true;
            }
          }
          return false;
        },
        deadlineMs);
    return fired ? found : std::nullopt;
  }

 public:
  ~TestDashboardsE2e() override { shutDown(); }

 private slots:
  void initTestCase() {
    const QString missing = findSuiteEnvironment(env_);
    QVERIFY2(missing.isEmpty(), qPrintable(missing));
    QVERIFY2(workDir_.isValid(), qPrintable(workDir_.errorString()));
    nam_.setProxy(QNetworkProxy::NoProxy);

    db_ = std::make_unique<test::TestDatabase>("tst_dashboards_e2e");
    const sim::SimulationConfig config = trafficConfig(*db_);
    const auto problems = config.validate();
    QVERIFY2(problems.empty(), problems.empty() ? "" : problems.front().c_str());

    QString error = startExporter();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    startTraffic();
    error = waitForEverySeries();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    error = startPrometheus(env_.prometheus);
    QVERIFY2(error.isEmpty(), qPrintable(error));
  }

  void cleanupTestCase() {
    shutDown();
    if (const auto summary = traffic_.summary())
      qInfo().noquote() << "traffic:\n" << QString::fromStdString(summary->render());
  }

  // The traffic reached Prometheus with every case the panels and alerts are about; without this
  // the tests below could pass on panels that show nothing interesting.
  void simulatedTrafficReachesPrometheusWithEveryCase() {
    const QString sel = QStringLiteral("job=\"%1\"").arg(kJob);
    const std::vector<std::pair<QString, QString>> checks{
        {"three biz types",
         "count(count by (biz_type) (idempotency_requests_total{" + sel + "})) == 3"},
        {"requests from every source",
         "count(sum by (source) (idempotency_requests_total{" + sel + "}) > 0) == 5"},
        {"UNKNOWN records", "sum(idempotency_records{" + sel + ",status=\"UNKNOWN\"}) > 0"},
        {"stuck PROCESSING records", "sum(idempotency_stuck_records{" + sel + "}) > 0"},
        {"duplicate fund flows", "sum(idempotency_duplicate_fund_flows_total{" + sel + "}) > 0"},
        {"replayed requests",
         "sum(idempotency_requests_total{" + sel + ",outcome=\"replayed\"}) > 0"},
        {"in_progress requests",
         "sum(idempotency_requests_total{" + sel + ",outcome=\"in_progress\"}) > 0"},
        // Schema v2: the retired outcome exists from the start (no retention runs here), and the
        // reconciler and the operator decide stuck records.
        {"the retired outcome", "count(count by (biz_type) (idempotency_requests_total{" + sel +
                                    ",outcome=\"retired\"})) == 3"},
        {"reconciler decisions",
         "sum(idempotency_transitions_total{" + sel + ",actor_kind=\"reconciler\"}) > 0"},
        {"operator decisions",
         "sum(idempotency_transitions_total{" + sel + ",actor_kind=\"operator\"}) > 0"},
    };
    QStringList missing;
    const bool seen = QTest::qWaitFor(
        [&] {
          missing.clear();
          for (const auto& [what, expr] : checks) {
            if (!api_->query(expr).hasNumber()) missing << what + " (" + expr + ")";
          }
          return missing.isEmpty();
        },
        60'000);
    QVERIFY2(trafficProblem().isEmpty(), qPrintable(trafficProblem()));
    QVERIFY2(seen, qPrintable("not seen in Prometheus within 60s: " + missing.join("; ")));
  }

  // The job and instance variables' own queries (label_values, which --print-exprs does not
  // print) offer the values the suite fills in: the dashboards would select this exporter.
  void dashboardVariablesOfferTheScrapedExporter() {
    static const QRegularExpression labelValues(
        QStringLiteral(R"(^\s*label_values\((.+),\s*(\w+)\s*\)\s*$)"));
    QStringList failures;
    int checked = 0;
    for (const auto& [file, dashboard] : dashboards()) {
      for (const auto& v : dashboard.value("templating").toObject().value("list").toArray()) {
        const QJsonObject variable = v.toObject();
        if (variable.value("type").toString() != QLatin1String("query")) continue;
        const QString name = variable.value("name").toString();
        const QJsonValue q = variable.value("query");
        const QString query = q.isObject() ? q.toObject().value("query").toString() : q.toString();
        const QString where = file + " / $" + name + ": " + query;
        const QRegularExpressionMatch m = labelValues.match(query);
        if (!m.hasMatch()) {
          failures
              << where + "\n    -> not label_values(SELECTOR, LABEL): teach this test the new form";
          continue;
        }
        QString unset;
        const QString selector = fillIn(m.captured(1), unset);
        if (!unset.isEmpty()) {
          failures << where + "\n    -> no value for " + unset;
          continue;
        }
        const std::map<std::string, std::string> values = variableValues();
        const auto expected = values.find(name.toStdString());
        if (expected == values.end()) {
          failures << where + "\n    -> the suite gives $" + name + " no value";
          continue;
        }
        QString error;
        const QStringList offered = api_->labelValues(m.captured(2), selector, error);
        ++checked;
        if (!error.isEmpty()) {
          failures << where + "\n    -> query failed: " + error;
        } else if (!offered.contains(QString::fromStdString(expected->second))) {
          failures << where + "\n    -> offers [" + offered.join(", ") + "], not " +
                          QString::fromStdString(expected->second);
        }
      }
    }
    QVERIFY2(checked >= 4,
             qPrintable(QStringLiteral("expected $job and $instance in both dashboards, checked %1")
                            .arg(checked)));
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
  }

  void everyDashboardExpressionReturnsData() {
    // Whole [$__rate_interval] windows of scrapes behind every rate().
    const QString up =
        QStringLiteral("count_over_time(up{job=\"%1\"}[%2])").arg(kJob, kRateInterval);
    const bool filled = QTest::qWaitFor([&] { return api_->single(up).value_or(0) >= 14; }, 60'000);
    QVERIFY2(filled, qPrintable("within 60s, Prometheus did not hold 14 scrapes in the last " +
                                kRateInterval));

    const QDir dashboards(env_.sourceDir + "/dashboards/grafana/dashboards");
    QStringList arguments{
        "--print-exprs", "--with-source",          "--set", "job=" + kJob,
        "--set",         "instance=" + instance(), "--set", "__rate_interval=" + kRateInterval};
    const QStringList files = exporterDashboardFiles(dashboards);
    QVERIFY2(files.size() >= 2, qPrintable("expected the two dashboards in " + dashboards.path()));
    for (const QString& f : files) arguments << dashboards.absoluteFilePath(f);
    QProcess lint;
    lint.start(env_.binaryDir + "/dashboards/idemwatch-dashboard-lint", arguments);
    QVERIFY2(lint.waitForFinished(30'000), "the linter did not finish within 30s");
    QVERIFY2(lint.exitStatus() == QProcess::NormalExit && lint.exitCode() == 0,
             qPrintable("idemwatch-dashboard-lint --print-exprs failed: " +
                        QString::fromUtf8(lint.readAllStandardError())));

    // FILE<TAB>PANEL<TAB>REFID<TAB>EXPR, one query per line.
    QStringList failures;
    QSet<QString> filesSeen;
    int queried = 0;
    for (const QString& line :
         QString::fromUtf8(lint.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
      const QStringList parts = line.split('\t');
      QVERIFY2(parts.size() >= 4, qPrintable("unexpected linter line: " + line));
      const QString where = QStringLiteral("%1 / \"%2\" / %3")
                                .arg(QFileInfo(parts[0]).fileName(), parts[1], parts[2]);
      const QString expr = parts.mid(3).join('\t');
      filesSeen.insert(parts[0]);
      ++queried;
      const QueryAnswer answer = api_->query(expr);
      // Data means at least one number: a series that is NaN everywhere is an empty panel. Some
      // series may be NaN legitimately (coupons move no money, so coupon's duplicate ratio is 0/0).
      QString problem;
      if (!answer.error.isEmpty()) {
        problem = "query failed: " + answer.error;
      } else if (answer.samples.empty()) {
        problem = "empty result";
      } else if (!answer.hasNumber()) {
        problem = QStringLiteral("%1 series, all NaN or infinite").arg(answer.samples.size());
      }
      if (!problem.isEmpty()) failures << where + ": " + expr + "\n    -> " + problem;
    }
    QVERIFY2(trafficProblem().isEmpty(), qPrintable(trafficProblem()));
    QCOMPARE(filesSeen.size(), files.size());  // both dashboards contributed queries
    qInfo("%d dashboard queries run against Prometheus", queried);
    QVERIFY2(failures.isEmpty(),
             qPrintable(QStringLiteral("%1 of %2 dashboard queries returned no data:\n")
                            .arg(failures.size())
                            .arg(queried) +
                        failures.join('\n')));
  }

  void recordingRulesAgreeWithExporterGauges() {
    // The 5m ratio rules are evaluated every 30s. Compare at one evaluation with enough traffic
    // behind it, reading the exporter's gauges from the scrape that evaluation used.
    const QString rule = QStringLiteral("job:idempotency_hit_ratio:rate5m{job=\"%1\"}").arg(kJob);
    double evaluatedAt = 0;
    const bool evaluated = QTest::qWaitFor(
        [&] {
          evaluatedAt = api_->single("timestamp(" + rule + ")").value_or(0);
          return evaluatedAt >= scrapedSince_ + kComparedSeconds;
        },
        150'000);
    QVERIFY2(
        evaluated,
        qPrintable(QStringLiteral("no evaluation of %1 with %2s of scrapes behind it within 150s")
                       .arg(rule)
                       .arg(kComparedSeconds)));
    QVERIFY2(trafficProblem().isEmpty(), qPrintable(trafficProblem()));

    struct Figure {
      QString name;
      QString recorded;
      QString gauge;
      double min;  // both values must lie in (min, max): a non-trivial proportion
      double max;
    };
    const QString job = QStringLiteral("job=\"%1\"").arg(kJob);
    std::vector<Figure> figures{
        {"hit ratio", "job:idempotency_hit_ratio:rate5m{" + job + "}",
         "idempotency_hit_ratio{" + job + "}", 0, 1},
        {"duplicate fund flow ratio",
         "job:idempotency_duplicate_fund_flow_ratio:rate5m{" + job + "}",
         "idempotency_duplicate_fund_flow_ratio{" + job + "}", 0, 1},
    };
    for (const QString& source : kRetrySourceLabels) {
      const QString labels = job + ",source=\"" + source + "\"";
      figures.push_back({"retry-trigger ratio of " + source,
                         "source:idempotency_retry_trigger_ratio:rate5m{" + labels + "}",
                         "idempotency_retry_trigger_ratio{" + labels + "}", 0, 1});
    }

    QStringList disagreements;
    for (const Figure& f : figures) {
      const std::optional<double> recorded = api_->single(f.recorded, evaluatedAt);
      const std::optional<double> gauge = api_->single(f.gauge, evaluatedAt);
      QVERIFY2(recorded && gauge,
               qPrintable(QStringLiteral("%1: expected one series each from %2 and %3 at %4")
                              .arg(f.name, f.recorded, f.gauge)
                              .arg(evaluatedAt, 0, 'f', 3)));
      const QString values = QStringLiteral("%1: recording rule %2, exporter %3 (difference %4)")
                                 .arg(f.name)
                                 .arg(*recorded, 0, 'f', 5)
                                 .arg(*gauge, 0, 'f', 5)
                                 .arg(std::abs(*recorded - *gauge), 0, 'f', 5);
      qInfo().noquote() << values;
      QVERIFY2(
          *recorded > f.min && *recorded<f.max&& * gauge> f.min && *gauge < f.max,
          qPrintable(
              values +
              QStringLiteral(": both must lie strictly between %1 and %2").arg(f.min).arg(f.max)));
      if (!(std::abs(*recorded - *gauge) <= kRatioTolerance)) disagreements << values;
    }
    QVERIFY2(disagreements.isEmpty(),
             qPrintable(QStringLiteral("beyond the tolerance %1:\n").arg(kRatioTolerance) +
                        disagreements.join('\n')));
  }

  void duplicateFundFlowAlertFires() {
    // It compares with the counter a minute ago, so it needs a minute of scrapes, then an
    // evaluation of its group (every 30s).
    QString error;
    const std::optional<QJsonObject> alert =
        waitForFiringAlert("IdempotencyDuplicateFundFlow", 150'000, error);
    QVERIFY2(alert, qPrintable("IdempotencyDuplicateFundFlow did not fire within 150s " + error +
                               "; " + prometheus_->describe()));
    const QJsonObject labels = alert->value("labels").toObject();
    QCOMPARE(labels.value("job").toString(), kJob);
    QCOMPARE(labels.value("severity").toString(), QStringLiteral("critical"));
    QVERIFY2(QStringList({"payment", "refund"}).contains(labels.value("biz_type").toString()),
             qPrintable("biz_type " + labels.value("biz_type").toString()));
    QVERIFY(alert->value("annotations")
                .toObject()
                .value("runbook_url")
                .toString()
                .endsWith("#idempotencyduplicatefundflow"));
  }

  void debitWithoutSuccessAlertFires() {
    // Lost responses and crashes after the charge leave DEBIT flows without a SUCCESS record;
    // the exporter reconciles them after its (shortened) 5s grace.
    QString error;
    const std::optional<QJsonObject> alert =
        waitForFiringAlert("IdempotencyDebitWithoutSuccess", 90'000, error);
    QVERIFY2(alert, qPrintable("IdempotencyDebitWithoutSuccess did not fire within 90s " + error +
                               "; " + exporter_->describe()));
    QCOMPARE(alert->value("labels").toObject().value("severity").toString(),
             QStringLiteral("critical"));
    QVERIFY(parseSampleValue(alert->value("value")) > 0);
  }

  // The dashboards' alert annotations (not panel queries, so not printed by --print-exprs) show
  // the critical alerts that fire above.
  void alertAnnotationsShowFiringCriticalAlerts() {
    QStringList failures;
    int checked = 0;
    for (const auto& [file, dashboard] : dashboards()) {
      for (const auto& v : dashboard.value("annotations").toObject().value("list").toArray()) {
        const QJsonObject annotation = v.toObject();
        if (!annotation.contains("expr")) continue;  // Grafana's built-in annotations
        QString unset;
        const QString expr = fillIn(annotation.value("expr").toString(), unset);
        const QString where =
            file + " / annotation \"" + annotation.value("name").toString() + "\": " + expr;
        ++checked;
        if (!unset.isEmpty()) {
          failures << where + "\n    -> no value for " + unset;
          continue;
        }
        // The critical alerts above fire (for: 0m, held 15m); run on its own, this test waits
        // for the first evaluation of their group after a minute of scrapes.
        QueryAnswer answer;
        const bool shown = QTest::qWaitFor(
            [&] {
              answer = api_->query(expr);
              return !answer.samples.empty();
            },
            150'000);
        if (!shown) {
          failures << where + "\n    -> " +
                          (answer.error.isEmpty() ? "empty result"
                                                  : "query failed: " + answer.error);
        }
      }
    }
    QVERIFY2(checked >= 1, "no annotation query in the dashboards");
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
  }
};

QTEST_GUILESS_MAIN(TestDashboardsE2e)
#include "tst_dashboards_e2e.moc"

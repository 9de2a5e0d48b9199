// End to end for the dashboards, alerts and runbooks (issue 5). Real parts only: the
// idemwatch-exporter binary reads a real PostgreSQL that the simulator fills with steady agent
// traffic, and a real Prometheus scrapes it every second and loads the shipped rules
// (dashboards/rules/*.rules.yml). Then:
// - every query of both dashboards, its variables filled in by the linter as Grafana would fill
//   them, returns data through Prometheus' HTTP API;
// - the recording rules reproduce the exporter's own ratio gauges on the same traffic;
// - the money alerts fire on the traffic's faults (duplicate charges, debits without SUCCESS).
//
// The suite fails, never skips, when Prometheus is missing (Debian: apt-get install prometheus).
#include <sys/prctl.h>

#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkProxy>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "pg_cluster.hpp"
#include "simulator.hpp"
#include "template_vars.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

// What the dashboards' $__rate_interval is for 1s scrapes: Grafana takes at least four scrape
// intervals; 15 leaves room for a late scrape and still fills quickly.
const QString kRateInterval = QStringLiteral("15s");
// The alerts select job="idemwatch" (dashboards/rules/alerts.rules.yml).
const QString kJob = QStringLiteral("idemwatch");
const QStringList kRetrySources{"llm", "framework", "http", "callback"};

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

double nowSeconds() {
  return static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
}

QString tailOf(const QString& path, qint64 bytes = 4000) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return QStringLiteral("(no log at %1)").arg(path);
  if (f.size() > bytes) f.seek(f.size() - bytes);
  return QString::fromUtf8(f.readAll());
}

double parseSampleValue(const QJsonValue& v) {
  const QString s = v.toString();
  if (s == QLatin1String("NaN")) return std::numeric_limits<double>::quiet_NaN();
  if (s == QLatin1String("+Inf")) return std::numeric_limits<double>::infinity();
  if (s == QLatin1String("-Inf")) return -std::numeric_limits<double>::infinity();
  bool ok = false;
  const double d = s.toDouble(&ok);
  return ok ? d : std::numeric_limits<double>::quiet_NaN();
}

struct HttpAnswer {
  int status = 0;  // 0: no HTTP answer
  QByteArray body;
  QString error;
};

// Blocks, running a local event loop, until the answer or the timeout. A POST when form is set.
HttpAnswer httpRequest(QNetworkAccessManager& nam, const QUrl& url,
                       const std::optional<QByteArray>& form = std::nullopt,
                       std::chrono::milliseconds timeout = 10s) {
  QNetworkRequest request(url);
  request.setTransferTimeout(static_cast<int>(timeout.count()));
  QNetworkReply* reply = nullptr;
  if (form) {
    request.setHeader(QNetworkRequest::ContentTypeHeader, "application/x-www-form-urlencoded");
    reply = nam.post(request, *form);
  } else {
    reply = nam.get(request);
  }
  if (!reply->isFinished()) {
    QEventLoop loop;
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    loop.exec();
  }
  HttpAnswer answer;
  answer.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  answer.body = reply->readAll();
  if (reply->error() != QNetworkReply::NoError) answer.error = reply->errorString();
  delete reply;
  return answer;
}

struct Sample {
  QJsonObject metric;
  double value = 0;
};

// A query's result; error is empty on success.
struct QueryAnswer {
  QString error;
  std::vector<Sample> samples;
  bool hasNumber() const {
    for (const Sample& s : samples) {
      if (std::isfinite(s.value)) return true;
    }
    return false;
  }
};

// Prometheus' HTTP API (/api/v1/...) on 127.0.0.1.
class PrometheusApi {
 public:
  explicit PrometheusApi(int port) : base_(QStringLiteral("http://127.0.0.1:%1").arg(port)) {
    nam_.setProxy(QNetworkProxy::NoProxy);
  }

  bool ready() {
    return httpRequest(nam_, QUrl(base_ + "/-/ready"), std::nullopt, 2s).status == 200;
  }

  // An instant query, at `at` (seconds since the epoch) or now. Sent as a form POST, so that no
  // expression meets a URL length limit; each value is percent-encoded ('+' included).
  QueryAnswer query(const QString& expr, std::optional<double> at = std::nullopt) {
    QByteArray form = "query=" + QUrl::toPercentEncoding(expr);
    if (at) form += "&time=" + QByteArray::number(*at, 'f', 3);
    const HttpAnswer http = httpRequest(nam_, QUrl(base_ + "/api/v1/query"), form);
    QueryAnswer answer;
    const QJsonObject doc = QJsonDocument::fromJson(http.body).object();
    if (http.status != 200 || doc.value("status").toString() != QLatin1String("success")) {
      answer.error = QStringLiteral("HTTP %1 %2: %3 %4")
                         .arg(http.status)
                         .arg(http.error, doc.value("errorType").toString(),
                              doc.value("error").toString(QString::fromUtf8(http.body.left(300))));
      return answer;
    }
    const QJsonObject data = doc.value("data").toObject();
    const QString type = data.value("resultType").toString();
    if (type == QLatin1String("vector")) {
      for (const auto& v : data.value("result").toArray()) {
        const QJsonObject o = v.toObject();
        answer.samples.push_back(
            {o.value("metric").toObject(), parseSampleValue(o.value("value").toArray().at(1))});
      }
    } else if (type == QLatin1String("scalar")) {
      answer.samples.push_back({{}, parseSampleValue(data.value("result").toArray().at(1))});
    } else {
      answer.error = QStringLiteral("unexpected result type %1").arg(type);
    }
    return answer;
  }

  // The one value of a query that must return exactly one series; nullopt otherwise.
  std::optional<double> single(const QString& expr, std::optional<double> at = std::nullopt) {
    const QueryAnswer a = query(expr, at);
    if (!a.error.isEmpty() || a.samples.size() != 1) return std::nullopt;
    return a.samples.front().value;
  }

  // /api/v1/label/NAME/values restricted to the series `match` selects: what Grafana's
  // label_values(match, NAME) offers.
  QStringList labelValues(const QString& name, const QString& match, QString& error) {
    const QUrl url(base_ + "/api/v1/label/" + name +
                   "/values?match[]=" + QString::fromLatin1(QUrl::toPercentEncoding(match)));
    const HttpAnswer http = httpRequest(nam_, url);
    const QJsonObject doc = QJsonDocument::fromJson(http.body).object();
    if (http.status != 200 || doc.value("status").toString() != QLatin1String("success")) {
      error = QStringLiteral("HTTP %1 %2 %3")
                  .arg(http.status)
                  .arg(http.error, doc.value("error").toString());
      return {};
    }
    QStringList values;
    for (const auto& v : doc.value("data").toArray()) values << v.toString();
    return values;
  }

  // /api/v1/alerts: pending and firing alerts.
  QJsonArray alerts(QString& error) {
    const HttpAnswer http = httpRequest(nam_, QUrl(base_ + "/api/v1/alerts"));
    const QJsonObject doc = QJsonDocument::fromJson(http.body).object();
    if (http.status != 200 || doc.value("status").toString() != QLatin1String("success")) {
      error = QStringLiteral("HTTP %1 %2").arg(http.status).arg(http.error);
      return {};
    }
    return doc.value("data").toObject().value("alerts").toArray();
  }

 private:
  QString base_;
  QNetworkAccessManager nam_;
};

// A child process whose output goes to a log file (a pipe nobody reads would block it), stopped
// with SIGTERM, then SIGKILL, when the test ends on any path.
class ChildProcess {
 public:
  ChildProcess(QString name, QString logPath)
      : name_(std::move(name)), logPath_(std::move(logPath)) {
    process_.setProcessChannelMode(QProcess::MergedChannels);
    process_.setStandardOutputFile(logPath_);
    // Should the test process die without unwinding (a crash, ctest's timeout kill), the child
    // gets SIGTERM from the kernel instead of living on.
    process_.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
  }
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Empty on success, else why it did not start.
  QString start(const QString& program, const QStringList& arguments) {
    process_.start(program, arguments);
    if (!process_.waitForStarted(10'000)) {
      return QStringLiteral("%1 did not start (%2 %3): %4")
          .arg(name_, program, arguments.join(' '), process_.errorString());
    }
    return {};
  }

  bool running() const { return process_.state() != QProcess::NotRunning; }

  // For failure messages: whether it still runs, and the end of its log.
  QString describe() const {
    QString state =
        running() ? QStringLiteral("%1 is running").arg(name_)
                  : QStringLiteral("%1 has exited (code %2)").arg(name_).arg(process_.exitCode());
    return state + QStringLiteral("; the end of its log (%1):\n").arg(logPath_) + tailOf(logPath_);
  }

  void stop() {
    if (process_.state() == QProcess::NotRunning) return;
    process_.terminate();
    if (!process_.waitForFinished(10'000)) {
      process_.kill();
      process_.waitForFinished(5'000);
    }
  }

 private:
  QString name_;
  QString logPath_;
  QProcess process_;
};

QString prometheusBinary() {
  QString onPath = QStandardPaths::findExecutable(QStringLiteral("prometheus"));
  if (!onPath.isEmpty()) return onPath;
  return QFileInfo(QStringLiteral("/usr/bin/prometheus")).isExecutable()
             ? QStringLiteral("/usr/bin/prometheus")
             : QString();
}

// Steady, throttled traffic of the three biz types with every case the dashboards and alerts
// watch: retries from each source (at distinct rates), lost responses (UNKNOWN), crashes past a
// short lease (stuck PROCESSING), concurrent copies (in_progress), a buggy downstream charging
// twice (duplicate fund flows), and, at intervals long enough that stuck records and debits
// without SUCCESS are always there between the rounds, the reconciler (idem.reconcile) and an
// operator settling stuck records (schema v2's actor kinds). Runs until stopped.
sim::SimulationConfig trafficConfig(const test::TestDatabase& db) {
  sim::SimulationConfig c;
  c.connection.dsn = db.dsn();
  c.connection.source = "test";
  c.agents = 4;
  c.seed = 2024;
  c.operations = 0;
  c.operationsPerSecond = 40;
  c.bizTypes = {"payment", "refund", "coupon"};
  c.runId = "e2e";
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

  QString sourceDir_;
  QString binaryDir_;
  QTemporaryDir workDir_;
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<ChildProcess> exporter_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::unique_ptr<PrometheusApi> api_;
  QNetworkAccessManager nam_;
  int exporterPort_ = 0;
  int prometheusPort_ = 0;
  double scrapedSince_ = 0;  // when Prometheus held its first sample of the exporter

  std::atomic<bool> stopTraffic_{false};
  std::thread traffic_;
  std::mutex trafficMutex_;
  QString trafficError_;
  std::optional<sim::SimulationSummary> trafficSummary_;

  QString instance() const { return QStringLiteral("127.0.0.1:%1").arg(exporterPort_); }

  // Empty while the simulator runs, else what went wrong with it.
  QString trafficProblem() {
    std::lock_guard lock(trafficMutex_);
    if (!trafficError_.isEmpty()) return QStringLiteral("the simulator failed: ") + trafficError_;
    if (trafficSummary_ && !stopTraffic_) return QStringLiteral("the simulator stopped early");
    return {};
  }

  // Everything the suite started, stopped in dependency order; safe to call twice.
  void shutDown() {
    stopTraffic_ = true;
    if (traffic_.joinable()) traffic_.join();
    prometheus_.reset();
    exporter_.reset();
    db_.reset();
  }

  QString startExporter() {
    exporterPort_ = test::freePort();
    exporter_ =
        std::make_unique<ChildProcess>("idemwatch-exporter", workDir_.filePath("exporter.log"));
    QString error = exporter_->start(
        binaryDir_ + "/exporter/idemwatch-exporter",
        {"--db.dsn=" + QString::fromStdString(db_->dsn()), "--web.listen-address=" + instance(),
         "--collect-interval=1s", "--ratio-window=" + kRatioWindow,
         // Reconciliation soon after a debit, so that IdempotencyDebitWithoutSuccess can fire
         // within the test (the default grace is 5m).
         "--reconcile-interval=5s", "--reconcile-grace=5s", "--log.level=warn"});
    if (!error.isEmpty()) return error;
    const QUrl url(QStringLiteral("http://%1/metrics").arg(instance()));
    const bool up = QTest::qWaitFor(
        [&] {
          if (!exporter_->running()) return true;
          const HttpAnswer a = httpRequest(nam_, url, std::nullopt, 2s);
          return a.status == 200 && a.body.contains("\nidempotency_exporter_db_up 1");
        },
        30'000);
    if (!up || !exporter_->running()) {
      return "the exporter did not serve idempotency_exporter_db_up 1 within 30s; " +
             exporter_->describe();
    }
    return {};
  }

  void startTraffic() {
    const sim::SimulationConfig config = trafficConfig(*db_);
    traffic_ = std::thread([this, config] {
      try {
        sim::SimulationSummary summary = sim::simulate(config, stopTraffic_);
        std::lock_guard lock(trafficMutex_);
        trafficSummary_ = std::move(summary);
      } catch (const std::exception& e) {
        std::lock_guard lock(trafficMutex_);
        trafficError_ = QString::fromUtf8(e.what());
      }
    });
  }

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

  QString writePrometheusConfig(const QString& path) const {
    const QDir rules(sourceDir_ + "/dashboards/rules");
    const QStringList ruleFiles = rules.entryList({"*.rules.yml"}, QDir::Files, QDir::Name);
    if (ruleFiles.size() != 3) {
      return QStringLiteral("expected the three rule files in %1, found: %2")
          .arg(rules.path(), ruleFiles.join(", "));
    }
    QString yaml = QStringLiteral(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "rule_files:\n");
    for (const QString& f : ruleFiles) yaml += "  - \"" + rules.absoluteFilePath(f) + "\"\n";
    yaml += QStringLiteral(
                "scrape_configs:\n"
                "  - job_name: %1\n"
                "    static_configs:\n"
                "      - targets: [\"%2\"]\n")
                .arg(kJob, instance());
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) return "cannot write " + path;
    file.write(yaml.toUtf8());
    return {};
  }

  QString startPrometheus(const QString& program) {
    const QString config = workDir_.filePath("prometheus.yml");
    if (QString error = writePrometheusConfig(config); !error.isEmpty()) return error;
    prometheusPort_ = test::freePort();
    prometheus_ = std::make_unique<ChildProcess>("prometheus", workDir_.filePath("prometheus.log"));
    QString error = prometheus_->start(
        program, {"--config.file=" + config, "--storage.tsdb.path=" + workDir_.filePath("tsdb"),
                  QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(prometheusPort_),
                  "--log.level=warn"});
    if (!error.isEmpty()) return error;
    api_ = std::make_unique<PrometheusApi>(prometheusPort_);
    const bool ready =
        QTest::qWaitFor([&] { return !prometheus_->running() || api_->ready(); }, 60'000);
    if (!ready || !prometheus_->running())
      return "Prometheus was not ready within 60s; " + prometheus_->describe();

    // Its first sample of the exporter, and when it was taken.
    const QString up = QStringLiteral("up{job=\"%1\"}").arg(kJob);
    const bool scraped =
        QTest::qWaitFor([&] { return api_->single(up) == 1.0 || !prometheus_->running(); }, 30'000);
    if (!scraped || !prometheus_->running()) {
      return "Prometheus did not scrape the exporter successfully within 30s (up != 1); " +
             prometheus_->describe();
    }
    scrapedSince_ = api_->single("timestamp(" + up + ")").value_or(nowSeconds());
    return {};
  }

  // The two dashboards, parsed.
  std::vector<std::pair<QString, QJsonObject>> dashboards() const {
    const QDir dir(sourceDir_ + "/dashboards/grafana/dashboards");
    std::vector<std::pair<QString, QJsonObject>> out;
    for (const QString& f : dir.entryList({"*.json"}, QDir::Files, QDir::Name)) {
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
    sourceDir_ = qEnvironmentVariable("IDEMWATCH_SOURCE_DIR");
    binaryDir_ = qEnvironmentVariable("IDEMWATCH_BINARY_DIR");
    QVERIFY2(!sourceDir_.isEmpty() && !binaryDir_.isEmpty(),
             "IDEMWATCH_SOURCE_DIR and IDEMWATCH_BINARY_DIR must be set (ctest sets both)");
    for (const QString& binary : {binaryDir_ + "/exporter/idemwatch-exporter",
                                  binaryDir_ + "/dashboards/idemwatch-dashboard-lint"}) {
      QVERIFY2(QFileInfo(binary).isExecutable(),
               qPrintable(binary + " is missing: build it first"));
    }
    const QString prometheus = prometheusBinary();
    QVERIFY2(
        !prometheus.isEmpty(),
        "prometheus is not installed (looked on PATH and at /usr/bin/prometheus): "
        "apt-get install prometheus. This suite needs a real Prometheus and is never skipped.");
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
    error = startPrometheus(prometheus);
    QVERIFY2(error.isEmpty(), qPrintable(error));
  }

  void cleanupTestCase() {
    shutDown();
    std::lock_guard lock(trafficMutex_);
    if (trafficSummary_)
      qInfo().noquote() << "traffic:\n" << QString::fromStdString(trafficSummary_->render());
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

    const QDir dashboards(sourceDir_ + "/dashboards/grafana/dashboards");
    QStringList arguments{
        "--print-exprs", "--with-source",          "--set", "job=" + kJob,
        "--set",         "instance=" + instance(), "--set", "__rate_interval=" + kRateInterval};
    const QStringList files = dashboards.entryList({"*.json"}, QDir::Files, QDir::Name);
    QVERIFY2(files.size() >= 2, qPrintable("expected the two dashboards in " + dashboards.path()));
    for (const QString& f : files) arguments << dashboards.absoluteFilePath(f);
    QProcess lint;
    lint.start(binaryDir_ + "/dashboards/idemwatch-dashboard-lint", arguments);
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
    for (const QString& source : kRetrySources) {
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

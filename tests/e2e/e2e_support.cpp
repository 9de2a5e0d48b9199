#include "e2e_support.hpp"

#include <sys/prctl.h>

#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QNetworkProxy>
#include <QNetworkReply>
#include <QStandardPaths>
#include <QtTest>
#include <cmath>
#include <csignal>
#include <limits>

namespace idem::e2e {

using namespace std::chrono_literals;

double nowSeconds() {
  return static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
}

QString tailOf(const QString& path, qint64 bytes) {
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

HttpAnswer httpRequest(QNetworkAccessManager& nam, const QUrl& url,
                       const std::optional<QByteArray>& form, std::chrono::milliseconds timeout) {
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

bool QueryAnswer::hasNumber() const {
  for (const Sample& s : samples) {
    if (std::isfinite(s.value)) return true;
  }
  return false;
}

PrometheusApi::PrometheusApi(int port) : base_(QStringLiteral("http://127.0.0.1:%1").arg(port)) {
  nam_.setProxy(QNetworkProxy::NoProxy);
}

bool PrometheusApi::ready() {
  return httpRequest(nam_, QUrl(base_ + "/-/ready"), std::nullopt, 2s).status == 200;
}

QueryAnswer PrometheusApi::query(const QString& expr, std::optional<double> at) {
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

std::optional<double> PrometheusApi::single(const QString& expr, std::optional<double> at) {
  const QueryAnswer a = query(expr, at);
  if (!a.error.isEmpty() || a.samples.size() != 1) return std::nullopt;
  return a.samples.front().value;
}

QStringList PrometheusApi::labelValues(const QString& name, const QString& match, QString& error) {
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

QJsonArray PrometheusApi::alerts(QString& error) {
  const HttpAnswer http = httpRequest(nam_, QUrl(base_ + "/api/v1/alerts"));
  const QJsonObject doc = QJsonDocument::fromJson(http.body).object();
  if (http.status != 200 || doc.value("status").toString() != QLatin1String("success")) {
    error = QStringLiteral("HTTP %1 %2").arg(http.status).arg(http.error);
    return {};
  }
  return doc.value("data").toObject().value("alerts").toArray();
}

ChildProcess::ChildProcess(QString name, QString logPath)
    : name_(std::move(name)), logPath_(std::move(logPath)) {
  process_.setProcessChannelMode(QProcess::MergedChannels);
  process_.setStandardOutputFile(logPath_);
  // Should the test process die without unwinding (a crash, ctest's timeout kill), the child
  // gets SIGTERM from the kernel instead of living on.
  process_.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
}

QString ChildProcess::start(const QString& program, const QStringList& arguments) {
  process_.start(program, arguments);
  if (!process_.waitForStarted(10'000)) {
    return QStringLiteral("%1 did not start (%2 %3): %4")
        .arg(name_, program, arguments.join(' '), process_.errorString());
  }
  return {};
}

QString ChildProcess::describe() const {
  QString state =
      running() ? QStringLiteral("%1 is running").arg(name_)
                : QStringLiteral("%1 has exited (code %2)").arg(name_).arg(process_.exitCode());
  return state + QStringLiteral("; the end of its log (%1):\n").arg(logPath_) + tailOf(logPath_);
}

void ChildProcess::stop() {
  if (process_.state() == QProcess::NotRunning) return;
  process_.terminate();
  if (!process_.waitForFinished(10'000)) {
    process_.kill();
    process_.waitForFinished(5'000);
  }
}

QString prometheusBinary() {
  QString onPath = QStandardPaths::findExecutable(QStringLiteral("prometheus"));
  if (!onPath.isEmpty()) return onPath;
  return QFileInfo(QStringLiteral("/usr/bin/prometheus")).isExecutable()
             ? QStringLiteral("/usr/bin/prometheus")
             : QString();
}

QString findSuiteEnvironment(SuiteEnvironment& env) {
  env.sourceDir = qEnvironmentVariable("IDEMWATCH_SOURCE_DIR");
  env.binaryDir = qEnvironmentVariable("IDEMWATCH_BINARY_DIR");
  if (env.sourceDir.isEmpty() || env.binaryDir.isEmpty())
    return QStringLiteral(
        "IDEMWATCH_SOURCE_DIR and IDEMWATCH_BINARY_DIR must be set (ctest sets both)");
  for (const QString& binary : {env.binaryDir + "/exporter/idemwatch-exporter",
                                env.binaryDir + "/dashboards/idemwatch-dashboard-lint"}) {
    if (!QFileInfo(binary).isExecutable()) return binary + " is missing: build it first";
  }
  env.prometheus = prometheusBinary();
  if (env.prometheus.isEmpty()) {
    return QStringLiteral(
        "prometheus is not installed (looked on PATH and at /usr/bin/prometheus): "
        "apt-get install prometheus. This suite needs a real Prometheus and is never skipped.");
  }
  return {};
}

QString startExporter(ChildProcess& exporter, const QString& binaryDir, const std::string& dsn,
                      const QString& instance, const QStringList& extraArguments,
                      QNetworkAccessManager& nam) {
  QString error = exporter.start(
      binaryDir + "/exporter/idemwatch-exporter",
      QStringList{"--db.dsn=" + QString::fromStdString(dsn), "--web.listen-address=" + instance,
                  "--collect-interval=1s", "--log.level=warn"} +
          extraArguments);
  if (!error.isEmpty()) return error;
  const QUrl url(QStringLiteral("http://%1/metrics").arg(instance));
  const bool up = QTest::qWaitFor(
      [&] {
        if (!exporter.running()) return true;
        const HttpAnswer a = httpRequest(nam, url, std::nullopt, 2s);
        return a.status == 200 && a.body.contains("\nidempotency_exporter_db_up 1");
      },
      30'000);
  if (!up || !exporter.running()) {
    return "the exporter did not serve idempotency_exporter_db_up 1 within 30s; " +
           exporter.describe();
  }
  return {};
}

QString writePrometheusConfig(const QString& path, const QString& sourceDir, const QString& job,
                              const QStringList& targets) {
  const QDir rules(sourceDir + "/dashboards/rules");
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
              .arg(job, targets.join("\", \""));
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) return "cannot write " + path;
  file.write(yaml.toUtf8());
  return {};
}

QString startPrometheus(ChildProcess& prometheus, PrometheusApi& api, const QString& program,
                        const QString& config, const QString& workDir, int port, const QString& job,
                        int targets, double& scrapedSince) {
  QString error = prometheus.start(
      program, {"--config.file=" + config, "--storage.tsdb.path=" + QDir(workDir).filePath("tsdb"),
                QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(port), "--log.level=warn"});
  if (!error.isEmpty()) return error;
  const bool ready = QTest::qWaitFor([&] { return !prometheus.running() || api.ready(); }, 60'000);
  if (!ready || !prometheus.running())
    return "Prometheus was not ready within 60s; " + prometheus.describe();

  // Its first sample of every exporter, and when the last of them was taken.
  const QString up = QStringLiteral("up{job=\"%1\"}").arg(job);
  const bool scraped = QTest::qWaitFor(
      [&] {
        return api.single("count(" + up + " == 1)") == static_cast<double>(targets) ||
               !prometheus.running();
      },
      30'000);
  if (!scraped || !prometheus.running()) {
    return QStringLiteral(
               "Prometheus did not scrape all %1 exporter(s) successfully within 30s "
               "(up != 1); ")
               .arg(targets) +
           prometheus.describe();
  }
  scrapedSince = api.single("max(timestamp(" + up + "))").value_or(nowSeconds());
  return {};
}

void BackgroundTraffic::start(const sim::SimulationConfig& config) {
  join();
  {
    std::lock_guard lock(mutex_);
    error_.clear();
    summary_.reset();
  }
  stop_ = false;
  thread_ = std::thread([this, config] {
    try {
      sim::SimulationSummary summary = sim::simulate(config, stop_);
      std::lock_guard lock(mutex_);
      summary_ = std::move(summary);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      error_ = QString::fromUtf8(e.what());
    }
  });
}

QString BackgroundTraffic::problem(bool mayEnd) {
  std::lock_guard lock(mutex_);
  if (!error_.isEmpty()) return QStringLiteral("the simulator failed: ") + error_;
  if (summary_ && !stop_ && !mayEnd) return QStringLiteral("the simulator stopped early");
  return {};
}

void BackgroundTraffic::join() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundTraffic::stop() {
  stop_ = true;
  join();
}

std::optional<sim::SimulationSummary> BackgroundTraffic::summary() {
  std::lock_guard lock(mutex_);
  return summary_;
}

}  // namespace idem::e2e

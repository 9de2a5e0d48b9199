// What the end-to-end suites share: real processes (the exporter, Prometheus) started as a user
// would start them, Prometheus' HTTP API, and simulator traffic on a thread of its own. Each suite
// keeps its own assertions; this file only starts, waits and asks.
#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "simulator.hpp"

namespace idem::e2e {

double nowSeconds();

// The last `bytes` of a log file, for failure messages.
QString tailOf(const QString& path, qint64 bytes = 4000);

// A sample value as Prometheus' JSON writes it ("NaN", "+Inf", "0.25").
double parseSampleValue(const QJsonValue& v);

struct HttpAnswer {
  int status = 0;  // 0: no HTTP answer
  QByteArray body;
  QString error;
};

// Blocks, running a local event loop, until the answer or the timeout. A POST when form is set.
HttpAnswer httpRequest(QNetworkAccessManager& nam, const QUrl& url,
                       const std::optional<QByteArray>& form = std::nullopt,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

struct Sample {
  QJsonObject metric;
  double value = 0;
};

// A query's result; error is empty on success.
struct QueryAnswer {
  QString error;
  std::vector<Sample> samples;
  bool hasNumber() const;
};

// Prometheus' HTTP API (/api/v1/...) on 127.0.0.1.
class PrometheusApi {
 public:
  explicit PrometheusApi(int port);

  bool ready();
  // An instant query, at `at` (seconds since the epoch) or now. Sent as a form POST, so that no
  // expression meets a URL length limit; each value is percent-encoded ('+' included).
  QueryAnswer query(const QString& expr, std::optional<double> at = std::nullopt);
  // The one value of a query that must return exactly one series; nullopt otherwise.
  std::optional<double> single(const QString& expr, std::optional<double> at = std::nullopt);
  // /api/v1/label/NAME/values restricted to the series `match` selects: what Grafana's
  // label_values(match, NAME) offers.
  QStringList labelValues(const QString& name, const QString& match, QString& error);
  // /api/v1/alerts: pending and firing alerts.
  QJsonArray alerts(QString& error);

 private:
  QString base_;
  QNetworkAccessManager nam_;
};

// A child process whose output goes to a log file (a pipe nobody reads would block it), stopped
// with SIGTERM, then SIGKILL, when the test ends on any path.
class ChildProcess {
 public:
  ChildProcess(QString name, QString logPath);
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Empty on success, else why it did not start.
  QString start(const QString& program, const QStringList& arguments);
  bool running() const { return process_.state() != QProcess::NotRunning; }
  // For failure messages: whether it still runs, and the end of its log.
  QString describe() const;
  void stop();

 private:
  QString name_;
  QString logPath_;
  QProcess process_;
};

// Debian's prometheus on PATH or at /usr/bin/prometheus; empty when neither exists.
QString prometheusBinary();

// What every suite needs before it starts anything: the directories ctest passes
// (IDEMWATCH_SOURCE_DIR, IDEMWATCH_BINARY_DIR), the built exporter and linter, and Prometheus.
struct SuiteEnvironment {
  QString sourceDir;
  QString binaryDir;
  QString prometheus;
};
// Empty when all is there, else what is missing (the suites fail on it, never skip).
QString findSuiteEnvironment(SuiteEnvironment& env);

// Starts binaryDir/exporter/idemwatch-exporter on `dsn`, listening on `instance` (host:port),
// collecting every second, with `extraArguments`; waits until it serves
// idempotency_exporter_db_up 1. Empty on success, else why not.
QString startExporter(ChildProcess& exporter, const QString& binaryDir, const std::string& dsn,
                      const QString& instance, const QStringList& extraArguments,
                      QNetworkAccessManager& nam);

// A Prometheus configuration at `path`: 1s scrapes and evaluations, the shipped rule files
// (sourceDir/dashboards/rules/*.rules.yml, all three, unedited) and one job scraping `targets`.
QString writePrometheusConfig(const QString& path, const QString& sourceDir, const QString& job,
                              const QStringList& targets);

// Starts Prometheus on `config` (its TSDB under workDir) on 127.0.0.1:port and waits until every
// target of `job` has been scraped successfully once. `scrapedSince` receives when the last of
// them was first scraped. Empty on success, else why not.
QString startPrometheus(ChildProcess& prometheus, PrometheusApi& api, const QString& program,
                        const QString& config, const QString& workDir, int port, const QString& job,
                        int targets, double& scrapedSince);

// sim::simulate on a thread of its own, until its config's bound or stop().
class BackgroundTraffic {
 public:
  BackgroundTraffic() = default;
  ~BackgroundTraffic() { stop(); }
  BackgroundTraffic(const BackgroundTraffic&) = delete;
  BackgroundTraffic& operator=(const BackgroundTraffic&) = delete;

  void start(const sim::SimulationConfig& config);
  // Empty while the simulator runs (or ended by its own bound when `mayEnd`), else what went
  // wrong with it.
  QString problem(bool mayEnd = false);
  // Waits for the simulator to reach its bound (for bounded configs).
  void join();
  // Asks it to stop and waits; safe to call twice.
  void stop();
  std::optional<sim::SimulationSummary> summary();

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  QString error_;
  std::optional<sim::SimulationSummary> summary_;
};

}  // namespace idem::e2e

#include "exporter_harness.hpp"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QSslConfiguration>
#include <QThread>
#include <QTimer>
#include <limits>
#include <stdexcept>

#include "pg_cluster.hpp"

namespace idem::test {

Series parseMetrics(const QByteArray& text) {
  Series out;
  for (const QByteArray& rawLine : text.split('\n')) {
    const QByteArray line = rawLine.trimmed();
    if (line.isEmpty() || line.startsWith('#')) continue;
    const int space = line.lastIndexOf(' ');
    if (space <= 0) continue;
    const std::string key = line.left(space).toStdString();
    const QByteArray v = line.mid(space + 1).toLower();
    double d = 0;
    if (v == "nan")
      d = std::numeric_limits<double>::quiet_NaN();
    else if (v == "+inf")
      d = std::numeric_limits<double>::infinity();
    else if (v == "-inf")
      d = -std::numeric_limits<double>::infinity();
    else
      d = v.toDouble();
    out[key] = d;
  }
  return out;
}

std::optional<double> value(const Series& s, const std::string& key) {
  const auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  return it->second;
}

HttpAnswer httpGet(const HttpRequest& request) {
  QNetworkAccessManager manager;
  QNetworkRequest r{QUrl(request.url)};
  r.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  if (request.basicAuth) {
    const QByteArray credentials =
        (request.basicAuth->first + ':' + request.basicAuth->second).toUtf8().toBase64();
    r.setRawHeader("Authorization", "Basic " + credentials);
  }
  if (request.trustedCa) {
    QSslConfiguration ssl = QSslConfiguration::defaultConfiguration();
    ssl.setCaCertificates({*request.trustedCa});
    r.setSslConfiguration(ssl);
  }
  QElapsedTimer timer;
  timer.start();
  QNetworkReply* reply = manager.get(r);
  QEventLoop loop;
  QTimer::singleShot(static_cast<int>(request.timeout.count()), &loop, &QEventLoop::quit);
  QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
  if (!reply->isFinished()) loop.exec();
  HttpAnswer answer;
  answer.elapsed = std::chrono::milliseconds(timer.elapsed());
  if (!reply->isFinished()) {
    answer.error = QStringLiteral("timeout");
    reply->abort();
  } else {
    answer.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    answer.body = reply->readAll();
    answer.contentType = reply->header(QNetworkRequest::ContentTypeHeader).toByteArray();
    if (reply->error() != QNetworkReply::NoError) answer.error = reply->errorString();
  }
  delete reply;
  return answer;
}

exporter::ExporterOptions testOptions(const std::string& dsn) {
  exporter::ExporterOptions o;
  o.dbDsn = dsn;
  o.collectInterval = std::chrono::milliseconds(200);
  o.reconcileInterval = std::chrono::milliseconds(200);
  o.logLevel = exporter::LogLevel::Warn;
  return o;
}

RunningExporter::RunningExporter(exporter::ExporterOptions options) : options_(std::move(options)) {
  port_ = freePort();
  options_.listenAddress = "127.0.0.1:" + std::to_string(port_);
  exporter_ = std::make_unique<exporter::Exporter>(options_);
}

RunningExporter::~RunningExporter() = default;

QString RunningExporter::url(const QString& path) const {
  return QStringLiteral("http://127.0.0.1:%1%2").arg(port_).arg(path);
}

bool RunningExporter::waitForCollections(int n, std::chrono::milliseconds deadline) {
  const std::uint64_t target = exporter_->collections() + static_cast<std::uint64_t>(n);
  return waitUntil([&] { return exporter_->collections() >= target; }, deadline);
}

Series RunningExporter::scrape() {
  const HttpAnswer a = httpGet({url(QString::fromStdString(options_.telemetryPath)), {}, {}});
  if (a.status != 200) {
    throw std::runtime_error("scrape failed: HTTP " + std::to_string(a.status) + " " +
                             a.error.toStdString());
  }
  return parseMetrics(a.body);
}

bool waitUntil(const std::function<bool()>& cond, std::chrono::milliseconds deadline) {
  QElapsedTimer timer;
  timer.start();
  while (!cond()) {
    if (timer.elapsed() > deadline.count()) return cond();
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    QThread::msleep(50);
  }
  return true;
}

QString exporterBinary() {
  return qEnvironmentVariable("IDEMWATCH_BINARY_DIR") +
         QStringLiteral("/exporter/idemwatch-exporter");
}

}  // namespace idem::test

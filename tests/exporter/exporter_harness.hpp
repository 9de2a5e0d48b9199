// What the exporter suites share: an in-process exporter on a free port, blocking HTTP(S)
// scrapes, and the text format parsed into series -> value.
#pragma once

#include <QByteArray>
#include <QSslCertificate>
#include <QString>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "exporter.hpp"
#include "exporter_options.hpp"

namespace idem::test {

// "name{a=\"x\",b=\"y\"}" -> value, for every sample line of a scrape.
using Series = std::map<std::string, double>;
Series parseMetrics(const QByteArray& text);
// 0 for an absent series is wrong for a test: absent and 0 must be told apart.
std::optional<double> value(const Series& s, const std::string& key);

struct HttpAnswer {
  int status = 0;  // 0: no HTTP answer (connection refused, TLS failure, timeout)
  QByteArray body;
  QByteArray contentType;
  std::chrono::milliseconds elapsed{0};
  QString error;
};

struct HttpRequest {
  QString url;
  std::optional<std::pair<QString, QString>> basicAuth;
  std::optional<QSslCertificate> trustedCa;  // for https with a self-signed certificate
  std::chrono::milliseconds timeout{10'000};
};

// Blocks (running a local event loop) until the answer or the timeout.
HttpAnswer httpGet(const HttpRequest& request);

// Options for an in-process exporter on 127.0.0.1 and a free port, collecting fast.
exporter::ExporterOptions testOptions(const std::string& dsn);

class RunningExporter {
 public:
  explicit RunningExporter(exporter::ExporterOptions options);
  ~RunningExporter();

  exporter::Exporter& exporter() { return *exporter_; }
  int port() const { return port_; }
  QString url(const QString& path = QStringLiteral("/metrics")) const;

  // Waits until n more collections have finished after this call; false at the deadline.
  bool waitForCollections(int n, std::chrono::milliseconds deadline = std::chrono::seconds(30));
  // A real HTTP scrape of the telemetry path; QFAIL-worthy errors are thrown as std::runtime_error.
  Series scrape();

 private:
  exporter::ExporterOptions options_;
  std::unique_ptr<exporter::Exporter> exporter_;
  int port_ = 0;
};

// Polls cond every 50 ms until it holds or the deadline passes.
bool waitUntil(const std::function<bool()>& cond,
               std::chrono::milliseconds deadline = std::chrono::seconds(30));

// The exporter's binary (built beside the tests).
QString exporterBinary();

}  // namespace idem::test

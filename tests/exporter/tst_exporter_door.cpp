// The exporter's web door against the exporter toolkit's rules, over real HTTP and TLS: client
// certificates verified against client_ca_file only (not the process' default trust store), every
// client_auth_type, client_allowed_sans, TLS versions, ciphers and curves, inline PEM, response
// headers, the rate limit; slow clients and wrong passwords that cannot starve an authorised
// scrape; strict Basic parsing; and every refused setting refused at start by name.
#include <arpa/inet.h>
#include <crypt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QSslConfiguration>
#include <QSslKey>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "exporter_harness.hpp"
#include "idem/web/web_config.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;
using Clock = std::chrono::steady_clock;

namespace {

std::string bcrypt(const std::string& password, unsigned long cost) {
  crypt_data data{};
  const char* salt = crypt_gensalt_rn("$2b$", cost, nullptr, 0, data.setting, sizeof data.setting);
  if (salt == nullptr) throw std::runtime_error("no bcrypt salt");
  const std::string saltCopy = salt;
  return crypt_r(password.c_str(), saltCopy.c_str(), &data);
}

QByteArray basic(const QByteArray& userColonPassword) {
  return "Basic " + userColonPassword.toBase64();
}

// One raw HTTP/1.1 exchange on 127.0.0.1:port; the whole answer, or "" when none came.
std::string rawHttp(int port, const std::string& request, int timeoutMs = 5000) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    char buffer[16384];
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  return answer;
}

// A connection from `source` (any address of 127/8) that sends nothing; -1 when it cannot connect.
int connectFrom(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within timeoutMs (end of stream or a reset).
bool closedByServer(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeoutMs) <= 0) return false;
  char c;
  return recv(fd, &c, 1, 0) <= 0;
}

int statusOf(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(answer.c_str() + 9) : 0;
}

std::string get(const std::string& path, const QByteArray& authorization = {}) {
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!authorization.isEmpty()) request += "Authorization: " + authorization.toStdString() + "\r\n";
  return request + "\r\n";
}

struct Client {
  QString certFile;  // empty: no client certificate
  QString keyFile;
};

// An HTTPS GET trusting only the server's certificate, optionally with a client certificate.
int httpsStatus(const QString& url, const QSslCertificate& serverCert, const Client& client = {}) {
  QNetworkAccessManager manager;
  QNetworkRequest r{QUrl(url)};
  QSslConfiguration ssl = QSslConfiguration::defaultConfiguration();
  ssl.setCaCertificates({serverCert});
  if (!client.certFile.isEmpty()) {
    ssl.setLocalCertificate(QSslCertificate::fromPath(client.certFile).value(0));
    QFile key(client.keyFile);
    if (!key.open(QIODevice::ReadOnly)) return -1;
    ssl.setPrivateKey(QSslKey(key.readAll(), QSsl::Ec));
  }
  r.setSslConfiguration(ssl);
  QNetworkReply* reply = manager.get(r);
  QEventLoop loop;
  QTimer::singleShot(10000, &loop, &QEventLoop::quit);
  QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
  if (!reply->isFinished()) loop.exec();
  const int status =
      reply->isFinished() ? reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() : 0;
  delete reply;
  return status;
}

std::string configError(const std::string& text, const std::filesystem::path& dir) {
  try {
    parseWebConfig(text, dir);
  } catch (const WebConfigError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  qWarning("\"%s\" does not contain \"%s\"", text.c_str(), part.c_str());
  return false;
}

}  // namespace

class TestExporterDoor : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;
  QTemporaryDir dir_;
  // Not a member QSslCertificate: constructing one loads Qt's TLS backend, which must wait.
  std::optional<QSslCertificate> serverCertificate_;
  const QSslCertificate& serverCert() const { return *serverCertificate_; }

  QString path(const QString& name) const { return dir_.filePath(name); }
  std::filesystem::path dir() const { return dir_.path().toStdString(); }

  void openssl(const QStringList& args) {
    QProcess p;
    p.setWorkingDirectory(dir_.path());
    p.start(QStringLiteral("openssl"), args);
    QVERIFY2(p.waitForFinished(60000) && p.exitCode() == 0, p.readAllStandardError().constData());
  }

  // A CA and a client certificate it signs, with a DNS SAN.
  void makeCaAndClient(const QString& ca, const QString& client, const QString& san) {
    const QStringList ec{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"};
    openssl(QStringList{"req", "-x509"} + ec +
            QStringList{"-days", "2", "-subj", "/CN=" + ca, "-keyout", ca + ".key", "-out",
                        ca + ".crt"});
    openssl(
        QStringList{"req"} + ec +
        QStringList{"-subj", "/CN=" + client, "-keyout", client + ".key", "-out", client + ".csr"});
    QFile ext(path(client + ".ext"));
    QVERIFY(ext.open(QIODevice::WriteOnly));
    ext.write(("subjectAltName=DNS:" + san + "\nextendedKeyUsage=clientAuth\n").toUtf8());
    ext.close();
    openssl({"x509", "-req", "-in", client + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
             "-CAcreateserial", "-days", "2", "-extfile", client + ".ext", "-out",
             client + ".crt"});
  }

  void writeFile(const QString& name, const std::string& text) {
    QFile f(path(name));
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text.c_str());
  }

  std::unique_ptr<RunningExporter> start(const std::string& webConfig) {
    writeFile(QStringLiteral("web.yml"), webConfig);
    auto options = testOptions(db_->dsn());
    options.webConfigFile = path(QStringLiteral("web.yml")).toStdString();
    try {
      return std::make_unique<RunningExporter>(options);
    } catch (const std::exception& e) {
      qWarning("the exporter did not start: %s", e.what());
      throw;
    }
  }

  QString https(const RunningExporter& e) const {
    return QStringLiteral("https://127.0.0.1:%1/metrics").arg(e.port());
  }

  static constexpr const char* kServerTls = "  cert_file: server.crt\n  key_file: server.key\n";

 private slots:
  void initTestCase() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_door");
    QVERIFY(dir_.isValid());
    if (!QSslSocket::supportsSsl()) QFAIL("Qt has no TLS backend here; the HTTPS tests cannot run");
    openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "server.key",
             "-out", "server.crt"});
    makeCaAndClient(QStringLiteral("trusted-ca"), QStringLiteral("alice"),
                    QStringLiteral("alice.example"));
    makeCaAndClient(QStringLiteral("other-ca"), QStringLiteral("mallory"),
                    QStringLiteral("alice.example"));
    serverCertificate_ = QSslCertificate::fromPath(path(QStringLiteral("server.crt"))).value(0);
    QVERIFY(!serverCert().isNull());
    // The process' default trust store holds the other CA: a context that loaded it would trust it.
    QFile bundle(path(QStringLiteral("default-store.pem")));
    QVERIFY(bundle.open(QIODevice::WriteOnly));
    QFile other(path(QStringLiteral("other-ca.crt")));
    QVERIFY(other.open(QIODevice::ReadOnly));
    bundle.write(other.readAll());
    bundle.close();
    qputenv("SSL_CERT_FILE", path(QStringLiteral("default-store.pem")).toUtf8());
  }

  void clientCertificatesAreVerifiedAgainstClientCaFileOnly() {
    auto e = start(std::string("tls_server_config:\n") + kServerTls +
                   "  client_auth_type: RequireAndVerifyClientCert\n"
                   "  client_ca_file: trusted-ca.crt\n");
    const Client alice{path("alice.crt"), path("alice.key")};
    const Client mallory{path("mallory.crt"), path("mallory.key")};
    QCOMPARE(httpsStatus(https(*e), serverCert(), alice), 200);
    QCOMPARE(httpsStatus(https(*e), serverCert(), mallory), 0);  // its CA is in SSL_CERT_FILE
    QCOMPARE(httpsStatus(https(*e), serverCert()), 0);           // none given, one required
  }

  void everyClientAuthTypeIsHonoured() {
    const Client alice{path("alice.crt"), path("alice.key")};
    const Client mallory{path("mallory.crt"), path("mallory.key")};
    struct Case {
      const char* policy;
      int none, trusted, other;
    };
    for (const Case& c :
         {Case{"NoClientCert", 200, 200, 200}, Case{"RequestClientCert", 200, 200, 200},
          Case{"RequireAnyClientCert", 0, 200, 200}, Case{"VerifyClientCertIfGiven", 200, 200, 0},
          Case{"RequireAndVerifyClientCert", 0, 200, 0}}) {
      const bool verifies = std::string(c.policy).find("Verify") != std::string::npos;
      auto e = start(std::string("tls_server_config:\n") + kServerTls + "  client_auth_type: " +
                     c.policy + "\n" + (verifies ? "  client_ca_file: trusted-ca.crt\n" : ""));
      QVERIFY2(httpsStatus(https(*e), serverCert()) == c.none, c.policy);
      QVERIFY2(httpsStatus(https(*e), serverCert(), alice) == c.trusted, c.policy);
      QVERIFY2(httpsStatus(https(*e), serverCert(), mallory) == c.other, c.policy);
    }
  }

  void clientAllowedSansAreChecked() {
    const Client alice{path("alice.crt"), path("alice.key")};
    const std::string base = std::string("tls_server_config:\n") + kServerTls +
                             "  client_auth_type: RequireAndVerifyClientCert\n"
                             "  client_ca_file: trusted-ca.crt\n";
    {
      auto e = start(base + "  client_allowed_sans: [bob.example, 10.0.0.1]\n");
      QCOMPARE(httpsStatus(https(*e), serverCert(), alice), 0);
    }
    auto e = start(base + "  client_allowed_sans: [bob.example, alice.example]\n");
    QCOMPARE(httpsStatus(https(*e), serverCert(), alice), 200);
  }

  void versionsCiphersAndCurvesAreApplied() {
    auto e = start(std::string("tls_server_config:\n") + kServerTls +
                   "  min_version: TLS12\n  max_version: TLS12\n"
                   "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
                   "  curve_preferences: [CurveP384]\n"
                   "  prefer_server_cipher_suites: false\n");
    const auto handshake = [&](const QStringList& extra) {
      QProcess p;
      p.start(QStringLiteral("openssl"),
              QStringList{"s_client", "-connect", QStringLiteral("127.0.0.1:%1").arg(e->port()),
                          "-brief"} +
                  extra);
      p.closeWriteChannel();
      p.waitForFinished(10000);
      return QString::fromUtf8(p.readAllStandardError() + p.readAllStandardOutput());
    };
    const QString ok = handshake({});
    QVERIFY2(ok.contains("Protocol version: TLSv1.2"), qPrintable(ok));
    QVERIFY2(ok.contains("Ciphersuite: ECDHE-RSA-AES128-GCM-SHA256"), qPrintable(ok));
    QVERIFY2(ok.contains("Temp Key: ECDH, secp384r1"), qPrintable(ok));  // CurveP384
    QVERIFY(!handshake({"-tls1_3"}).contains("Protocol version"));
    QVERIFY(!handshake({"-cipher", "ECDHE-RSA-AES256-GCM-SHA384", "-tls1_2"})
                 .contains("Protocol version"));
    QVERIFY(!handshake({"-groups", "P-256"}).contains("Protocol version"));
  }

  void inlinePemIsServed() {
    QFile cert(path("server.crt"));
    QFile key(path("server.key"));
    QFile ca(path("trusted-ca.crt"));
    QVERIFY(cert.open(QIODevice::ReadOnly) && key.open(QIODevice::ReadOnly) &&
            ca.open(QIODevice::ReadOnly));
    const auto block = [](QFile& f) {
      return "|\n    " + f.readAll().trimmed().replace("\n", "\n    ").toStdString() + "\n";
    };
    auto e =
        start("tls_server_config:\n  cert: " + block(cert) + "  key: " + block(key) +
              "  client_ca: " + block(ca) + "  client_auth_type: RequireAndVerifyClientCert\n");
    QCOMPARE(httpsStatus(https(*e), serverCert(), {path("alice.crt"), path("alice.key")}), 200);
    QCOMPARE(httpsStatus(https(*e), serverCert(), {path("mallory.crt"), path("mallory.key")}), 0);
  }

  void headersAndRateLimitApplyToEveryResponse() {
    auto e = start(
        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
        "    X-Content-Type-Options: nosniff\n"
        "    Content-Security-Policy: \"default-src 'self'\"\n"
        "rate_limit: {interval: 10s, burst: 3}\n");
    const std::string metrics = rawHttp(e->port(), get("/metrics"));
    QCOMPARE(statusOf(metrics), 200);
    QVERIFY(contains(metrics, "\r\nX-Frame-Options: deny\r\n"));
    QVERIFY(contains(metrics, "\r\nContent-Security-Policy: default-src 'self'\r\n"));
    QVERIFY(contains(metrics, "idempotency_exporter_build_info"));
    const std::string landing = rawHttp(e->port(), get("/"));
    QCOMPARE(statusOf(landing), 200);
    QVERIFY(contains(landing, "\r\nX-Content-Type-Options: nosniff\r\n"));
    QCOMPARE(statusOf(rawHttp(e->port(), get("/nothing"))), 404);
    QCOMPARE(statusOf(rawHttp(e->port(), get("/metrics"))), 429);  // the burst of 3 is used up
  }

  void malformedAuthorizationIsRefused() {
    auto e = start("basic_auth_users:\n  prometheus: '" + bcrypt("s3cret", 5) + "'\n");
    const int port = e->port();
    QCOMPARE(statusOf(rawHttp(port, get("/metrics", basic("prometheus:s3cret")))), 200);
    QCOMPARE(statusOf(rawHttp(
                 port, get("/metrics", "bAsIc " + QByteArray("prometheus:s3cret").toBase64()))),
             200);
    const QByteArray good = QByteArray("prometheus:s3cret").toBase64();
    for (const QByteArray& bad :
         {"BasicX" + good, "Basic  " + good, "Bearer " + good, "Basic " + good + "!",
          "Basic " + good.left(good.size() - 1), basic(QByteArray("prometheus:s3cret\0", 18)),
          basic(QByteArray("prometheus:s3cret\x01")), basic("prometheuss3cret"),
          QByteArray("Basic")}) {
      QVERIFY2(statusOf(rawHttp(port, get("/metrics", bad))) == 401, bad.constData());
    }
  }

  // A request whose head never ends is dropped after the header timeout (2.5 s).
  void aHalfSentRequestIsDroppedAfterTheHeaderTimeout() {
    auto e = start("basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 5) + "\n");
    const auto begin = Clock::now();
    const std::string answer =
        rawHttp(e->port(), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n", 15000);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin);
    qInfo("a half-sent request was dropped after %lld ms", static_cast<long long>(waited.count()));
    QVERIFY(statusOf(answer) != 200);
    QVERIFY(waited >= std::chrono::milliseconds(2000));
    QVERIFY(waited < std::chrono::milliseconds(4500));
  }

  // 16 clients that open a request and never finish it, and 8 that send wrong passwords as fast
  // as they are answered (cost 12, as the toolkit's users hash): an authorised scrape, remembered
  // from an earlier one, still answers at once. The p50/p99 printed are the bench figures.
  void slowClientsAndWrongPasswordsCannotStarveAScrape() {
    auto e = start("basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 12) + "\n");
    const int port = e->port();
    const std::string scrape = get("/metrics", basic("prometheus:s3cret"));
    QCOMPARE(statusOf(rawHttp(port, scrape)), 200);  // checked once, then remembered

    std::atomic<bool> stop{false};
    std::atomic<int> wrongAnswers{0};
    std::vector<std::thread> load;
    for (int i = 0; i < 16; ++i) {
      load.emplace_back([&] {
        while (!stop) rawHttp(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n", 4000);
      });
    }
    for (int i = 0; i < 8; ++i) {
      load.emplace_back([&, i] {
        for (int n = 0; !stop; ++n) {
          const QByteArray wrong = QStringLiteral("prometheus:wrong-%1-%2").arg(i).arg(n).toUtf8();
          if (statusOf(rawHttp(port, get("/metrics", basic(wrong)))) == 401) ++wrongAnswers;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the load takes hold
    std::vector<double> latencies;
    int failures = 0;
    for (int i = 0; i < 100; ++i) {
      const auto begin = Clock::now();
      const int status = statusOf(rawHttp(port, scrape));
      latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
      if (status != 200) ++failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop = true;
    for (std::thread& t : load) t.join();
    std::sort(latencies.begin(), latencies.end());
    const double p50 = latencies[latencies.size() / 2];
    const double p99 = latencies[latencies.size() * 99 / 100];
    qInfo(
        "scrape under 16 half-open + 8 wrong-password clients: p50 %.1f ms, p99 %.1f ms, "
        "max %.1f ms; %d wrong-password answers",
        p50, p99, latencies.back(), wrongAnswers.load());
    QCOMPARE(failures, 0);
    QVERIFY2(latencies.back() < 2000, "an authorised scrape waited 2 s or more");
    QVERIFY(wrongAnswers > 0);  // the wrong passwords were really being checked
  }

  // Connections beyond --web.max-connections-per-client from one address are refused as they
  // are accepted, and counted; another client's scrape is answered meanwhile.
  void connectionsBeyondTheClientLimitAreRefusedAtAccept() {
    auto options = testOptions(db_->dsn());
    options.webMaxConnectionsPerClient = 5;
    RunningExporter e(options);
    std::vector<int> held;
    for (int i = 0; i < 5; ++i) held.push_back(connectFrom("127.0.0.2", e.port()));
    QVERIFY(std::all_of(held.begin(), held.end(), [](int fd) { return fd >= 0; }));
    QTest::qWait(200);  // accepted and counted
    const int sixth = connectFrom("127.0.0.2", e.port());
    QVERIFY(sixth >= 0);
    QVERIFY2(closedByServer(sixth, 1000), "the sixth connection was not refused at once");
    close(sixth);
    QVERIFY(!closedByServer(held.front(), 200));  // the five are still open, awaiting a head
    const std::string scrape = rawHttp(e.port(), get("/metrics"));
    QCOMPARE(statusOf(scrape), 200);
    QVERIFY(contains(scrape,
                     "idempotency_exporter_http_connections_refused_total{limit=\"client\"} 1"));
    for (int fd : held) close(fd);
  }

  // Hundreds of connections that never start their TLS handshake, from other addresses, hold
  // nothing an authorised scrape needs: each is answered, and the door drops the silent ones once
  // their handshake time is up.
  void handshakesThatNeverStartStarveNoScrape() {
    auto e = start(std::string("tls_server_config:\n") + kServerTls +
                   "basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 5) + "\n");
    std::vector<int> silent;
    for (const char* source : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
      for (int i = 0; i < 60; ++i) silent.push_back(connectFrom(source, e->port()));
    }
    QTest::qWait(300);
    QNetworkAccessManager manager;
    for (int i = 0; i < 10; ++i) {
      QNetworkRequest r{QUrl(https(*e))};
      QSslConfiguration ssl = QSslConfiguration::defaultConfiguration();
      ssl.setCaCertificates({serverCert()});
      r.setSslConfiguration(ssl);
      r.setRawHeader("Authorization", basic("prometheus:s3cret"));
      QNetworkReply* reply = manager.get(r);
      QEventLoop loop;
      QTimer::singleShot(10000, &loop, &QEventLoop::quit);
      QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
      if (!reply->isFinished()) loop.exec();
      QCOMPARE(reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(), 200);
      const QByteArray body = reply->readAll();
      delete reply;
      if (i == 9) {
        // 4 addresses x 32 held, the rest refused at accept.
        QVERIFY2(body.contains(
                     "idempotency_exporter_http_connections_refused_total{limit=\"client\"} 112"),
                 body.constData());
      }
    }
    QVERIFY(closedByServer(silent.back() >= 0 ? silent.back() : silent.front(), 4000));
    for (int fd : silent) close(fd);
  }

  // Two I/O threads serve every connection, and a connection's handshake timer, its TLS engine
  // and its reads must never run on both at once. Connections that trickle a TLS record one byte
  // at a time until their handshake time runs out keep reads and timers completing together on
  // both threads; the door counts every drop and answers the scrape afterwards, in one process.
  void tricklingHandshakesOnBothIoThreadsAreServedOneAtATime() {
    auto e = start(std::string("tls_server_config:\n") + kServerTls);
    const int port = e->port();
    std::atomic<bool> stop{false};
    std::atomic<int> opened{0};
    std::vector<std::thread> load;
    for (const char* source : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
      for (int i = 0; i < 24; ++i) {
        load.emplace_back([&, source] {
          // A handshake record announcing 16 KiB, of which only single bytes ever arrive.
          const char header[] = {0x16, 0x03, 0x01, 0x40, 0x00};
          while (!stop) {
            const int fd = connectFrom(source, port);
            if (fd < 0) continue;
            ++opened;
            bool open = send(fd, header, sizeof header, MSG_NOSIGNAL) == sizeof header;
            while (open && !stop) {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              open = send(fd, "\x01", 1, MSG_NOSIGNAL) == 1;
            }
            close(fd);
          }
        });
      }
    }
    // And connections from one more address as fast as they come, most refused at accept.
    for (int i = 0; i < 16; ++i) {
      load.emplace_back([&] {
        while (!stop) {
          const int fd = connectFrom("127.0.0.6", port);
          if (fd < 0) continue;
          ++opened;
          send(fd, "\x16\x03\x01\x00\x05\x01", 6, MSG_NOSIGNAL);
          close(fd);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::seconds(8));  // three rounds of handshake timeouts
    stop = true;
    for (std::thread& t : load) t.join();
    QVERIFY(opened >= 96 * 2);  // every trickler was dropped and came back at least once
    QCOMPARE(httpsStatus(https(*e), serverCert()), 200);  // the same process, still serving
  }

  // Requests without a login are answered 401 and spend nothing of the rate limit: the scraper's
  // allowance is its own (a bucket per user).
  void anonymousRequestsDoNotSpendTheScrapersRateLimit() {
    auto e = start("basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 5) +
                   "\nrate_limit: {interval: 10s, burst: 3}\n");
    for (int i = 0; i < 30; ++i) QCOMPARE(statusOf(rawHttp(e->port(), get("/metrics"))), 401);
    const std::string scrape = get("/metrics", basic("prometheus:s3cret"));
    for (int i = 0; i < 3; ++i) QCOMPARE(statusOf(rawHttp(e->port(), scrape)), 200);
    QCOMPARE(statusOf(rawHttp(e->port(), scrape)), 429);  // its own burst of 3 is used up
  }

  void flowStyleAndEveryToolkitKeyAreAccepted() {
    const std::string config =
        "# the toolkit's keys, flow style, quoting, anchors and aliases\n"
        "tls_server_config: {cert_file: server.crt, key_file: 'server.key',\n"
        "  client_auth_type: \"VerifyClientCertIfGiven\", client_ca_file: trusted-ca.crt,\n"
        "  min_version: TLS12, max_version: TLS13, prefer_server_cipher_suites: true,\n"
        "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256],\n"
        "  curve_preferences: [X25519, CurveP256], client_allowed_sans: &sans [alice.example]}\n"
        "http_server_config: {http2: false, headers: {X-Frame-Options: sameorigin}}\n"
        "rate_limit: {interval: 100ms, burst: 50}\n"
        "basic_auth_users: {prometheus: '" +
        bcrypt("pw", 10) + "'}\n";
    QVERIFY(configError(config, dir()).empty());
    auto e = start(config);
    QCOMPARE(httpsStatus(https(*e), serverCert(), {path("alice.crt"), path("alice.key")}), 401);
  }

  void refusedSettingsAreRefusedByName() {
    const std::string tls = std::string("tls_server_config:\n") + kServerTls;
    const std::string cost31 = "$2b$31$" + std::string(53, 'a');
    const std::pair<std::string, std::string> refused[] = {
        {tls + "  foo: 1\n", "unknown key \"tls_server_config.foo\""},
        {tls + "  cipher_suites: [TLS_FAKE]\n", "cipher_suites: unknown cipher \"TLS_FAKE\""},
        {tls + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", "unknown cipher"},
        {tls + "  curve_preferences: [P-256]\n", "curve_preferences: unknown curve \"P-256\""},
        {tls + "  min_version: TLS14\n", "min_version: unknown TLS version \"TLS14\""},
        {tls + "  min_version: TLS13\n  max_version: TLS12\n", "min_version is above max_version"},
        {tls + "  client_auth_type: Sometimes\n",
         "client_auth_type: unknown client auth policy \"Sometimes\""},
        {tls + "  client_ca_file: trusted-ca.crt\n",
         "client CAs have been configured without a client auth policy"},
        {tls + "  client_auth_type: RequireAndVerifyClientCert\n",
         "client_auth_type needs client_ca_file"},
        {tls + "  client_allowed_sans: [a]\n", "client_allowed_sans needs a client_auth_type"},
        {tls + "  cert: x\n", "give cert_file or cert, not both"},
        {"tls_server_config: {cert_file: server.crt, key_file: trusted-ca.key}\n",
         "key_file is not the key of the certificate"},
        {"http_server_config: {http2: true}\n",
         "http_server_config.http2: true cannot be honoured"},
        {"http_server_config: {headers: {Content-Type: foo}}\n",
         "HTTP header \"Content-Type\" can not be configured"},
        {"http_server_config: {headers: {X-Frame-Options: allow}}\n",
         "X-Frame-Options: \"allow\" is not one of \"deny\", \"sameorigin\""},
        {"http_server_config:\n  headers:\n    X-XSS-Protection: \"1\\r\\nSet-Cookie: a\"\n",
         "line 3: http_server_config.headers.X-XSS-Protection: control characters"},
        {"rate_limit: {interval: 1s}\n", "rate_limit.burst must be at least 1"},
        {"rate_limit: {interval: soon, burst: 1}\n",
         "rate_limit.interval: \"soon\" is not a duration"},
        {"basic_auth_users:\n  alice: " + cost31 + "\n",
         "line 2: basic_auth_users: the bcrypt cost 31 of \"alice\" is above 14"},
        {"a: &x [*x]\n", "unknown key \"a\""},
        {"basic_auth_users: {a: 1\n", "line 2"},  // not YAML
        {"basic_auth_users:\n  a: x\nbasic_auth_users: {}\n",
         "line 3: duplicate key \"basic_auth_users\""},
    };
    for (const auto& [config, expected] : refused)
      QVERIFY2(contains(configError(config, dir()), expected), config.c_str());
  }

  void aCost31HashIsRefusedAtStart() {
    const std::string cost31 = "$2b$31$" + std::string(53, 'a');
    writeFile(QStringLiteral("cost31.yml"), "basic_auth_users:\n  alice: " + cost31 + "\n");
    auto options = testOptions(db_->dsn());
    options.webConfigFile = path(QStringLiteral("cost31.yml")).toStdString();
    try {
      RunningExporter e(options);
      QFAIL("a cost-31 hash must be refused at start");
    } catch (const std::exception& e) {
      QVERIFY(contains(e.what(), "cost31.yml: line 2: basic_auth_users: the bcrypt cost 31"));
    }
    // Cost 12, what the toolkit's users run, is accepted.
    QVERIFY(configError("basic_auth_users:\n  alice: " + bcrypt("pw", 12) + "\n", dir()).empty());
  }
};

QTEST_GUILESS_MAIN(TestExporterDoor)
#include "tst_exporter_door.moc"

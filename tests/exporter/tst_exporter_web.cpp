// The HTTP side for real: the landing page links the metrics, other paths are 404; TLS with a
// self-signed certificate made by openssl here; basic auth with bcrypt hashes on every path; and
// --web.config.file errors, each naming its problem.
#include <crypt.h>

#include <QProcess>
#include <QSslSocket>
#include <QTemporaryDir>
#include <QtTest>

#include "exporter_harness.hpp"
#include "idem/web/web_config.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

std::string bcrypt(const std::string& password) {
  crypt_data data{};
  const char* salt = crypt_gensalt_rn("$2b$", 5, nullptr, 0, data.setting, sizeof data.setting);
  if (salt == nullptr) throw std::runtime_error("no bcrypt salt");
  const std::string saltCopy = salt;
  return crypt_r(password.c_str(), saltCopy.c_str(), &data);
}

void writeFile(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(text);
}

std::string configError(const std::string& text, const std::filesystem::path& dir = "/tmp") {
  try {
    parseWebConfig(text, dir);
  } catch (const WebConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestExporterWeb : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;
  QTemporaryDir dir_;

  QString path(const QString& name) const { return dir_.filePath(name); }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_web");
    QVERIFY(dir_.isValid());
    QProcess openssl;
    openssl.start(QStringLiteral("openssl"),
                  {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                   "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                   path("server.key"), "-out", path("server.crt")});
    QVERIFY2(openssl.waitForFinished(60000) && openssl.exitCode() == 0,
             openssl.readAllStandardError().constData());
  }

  void landingPageLinksTheMetricsAndOtherPathsAreNotFound() {
    auto options = testOptions(db_->dsn());
    options.telemetryPath = "/custom-metrics";
    RunningExporter e(options);
    const HttpAnswer landing = httpGet({e.url(QStringLiteral("/")), {}, {}});
    QCOMPARE(landing.status, 200);
    QVERIFY(landing.contentType.startsWith("text/html"));
    QVERIFY(landing.body.contains("<a href=\"/custom-metrics\">"));
    QCOMPARE(httpGet({e.url(QStringLiteral("/metrics")), {}, {}}).status, 404);
    QCOMPARE(httpGet({e.url(QStringLiteral("/nothing")), {}, {}}).status, 404);
    const HttpAnswer metrics = httpGet({e.url(QStringLiteral("/custom-metrics")), {}, {}});
    QCOMPARE(metrics.status, 200);
    QVERIFY(metrics.body.contains("idempotency_exporter_build_info"));
  }

  void basicAuthGuardsEveryPath() {
    writeFile(path("auth.yml"),
              QByteArray("# users of the exporter\nbasic_auth_users:\n  prometheus: '") +
                  bcrypt("s3cret").c_str() + "'\n");
    auto options = testOptions(db_->dsn());
    options.webConfigFile = path("auth.yml").toStdString();
    RunningExporter e(options);
    QCOMPARE(httpGet({e.url(), {}, {}}).status, 401);
    QCOMPARE(httpGet({e.url(QStringLiteral("/")), {}, {}}).status, 401);
    QCOMPARE(
        httpGet({e.url(), std::pair{QStringLiteral("prometheus"), QStringLiteral("wrong")}, {}})
            .status,
        401);
    QCOMPARE(httpGet({e.url(), std::pair{QStringLiteral("nobody"), QStringLiteral("s3cret")}, {}})
                 .status,
             401);
    const HttpAnswer ok =
        httpGet({e.url(), std::pair{QStringLiteral("prometheus"), QStringLiteral("s3cret")}, {}});
    QCOMPARE(ok.status, 200);
    QVERIFY(ok.body.contains("idempotency_exporter_db_up"));
    // Remembered after the first bcrypt check, so that scrapes stay fast.
    const HttpAnswer again =
        httpGet({e.url(), std::pair{QStringLiteral("prometheus"), QStringLiteral("s3cret")}, {}});
    QCOMPARE(again.status, 200);
  }

  void tlsWithBasicAuthServesHttpsOnly() {
    if (!QSslSocket::supportsSsl())
      QFAIL("Qt has no TLS backend here; the HTTPS scrape cannot run");
    writeFile(path("tls.yml"),
              QByteArray("tls_server_config:\n  cert_file: server.crt\n  key_file: \"server.key\"\n"
                         "basic_auth_users:\n  prometheus: ") +
                  bcrypt("pw").c_str() + "\n");
    auto options = testOptions(db_->dsn());
    options.webConfigFile = path("tls.yml").toStdString();
    RunningExporter e(options);
    const QString https = QStringLiteral("https://127.0.0.1:%1/metrics").arg(e.port());
    const QList<QSslCertificate> certs = QSslCertificate::fromPath(path("server.crt"));
    QCOMPARE(certs.size(), 1);
    const HttpAnswer ok = httpGet(
        {https, std::pair{QStringLiteral("prometheus"), QStringLiteral("pw")}, certs.first()});
    QVERIFY2(ok.status == 200, ok.error.toUtf8().constData());
    QVERIFY(ok.body.contains("idempotency_exporter_build_info"));
    QCOMPARE(httpGet({https, {}, certs.first()}).status, 401);
    // Plain HTTP on the TLS port gets no metrics.
    const HttpAnswer plain = httpGet({e.url(),
                                      std::pair{QStringLiteral("prometheus"), QStringLiteral("pw")},
                                      {},
                                      std::chrono::milliseconds(3000)});
    QVERIFY(plain.status != 200);
    // An untrusted certificate is refused by the client: it really is TLS with our certificate.
    QCOMPARE(
        httpGet({https, std::pair{QStringLiteral("prometheus"), QStringLiteral("pw")}, {}}).status,
        0);
  }

  void aKeyOthersMayReadIsWarnedAboutAtStart() {
    namespace fs = std::filesystem;
    const fs::path key = path("server.key").toStdString();
    writeFile(path("key.yml"),
              "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
    fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::others_read);
    const auto wide = loadWebConfig(path("key.yml").toStdString());
    QCOMPARE(wide.warnings.size(), std::size_t{1});
    QVERIFY2(wide.warnings.front().find("mode 0644") != std::string::npos &&
                 wide.warnings.front().find("LoadCredential=") != std::string::npos,
             wide.warnings.front().c_str());
    fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
    QVERIFY(loadWebConfig(path("key.yml").toStdString()).warnings.empty());
  }

  void webConfigErrorsNameTheProblem() {
    QVERIFY(configError("").empty());  // an empty file: no TLS, no auth
    QVERIFY(configError("nonsense: 1\n").find("unknown key \"nonsense\"") != std::string::npos);
    QVERIFY(configError("basic_auth_users:\n  alice: plaintext\n").find("not a bcrypt hash") !=
            std::string::npos);
    QVERIFY(configError("tls_server_config:\n  cert_file: a.crt\n")
                .find("needs both cert_file and key_file") != std::string::npos);
    QVERIFY(configError("tls_server_config:\n  cert_file: /nope.crt\n  key_file: /nope.key\n")
                .find("cert_file /nope.crt cannot be read") != std::string::npos);
    // cipher_suites and RequireAnyClientCert are served now; what is refused is named.
    const std::string tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    QVERIFY(configError(tls + "  cipher_suites: [x]\n", dir_.path().toStdString())
                .find("cipher_suites: unknown cipher \"x\"") != std::string::npos);
    QVERIFY(
        configError(tls + "  client_auth_type: RequireSomeClientCert\n", dir_.path().toStdString())
            .find("client_auth_type") != std::string::npos);
    QVERIFY(configError("http_server_config:\n  http2: true\n").find("http_server_config") !=
            std::string::npos);
    QVERIFY(configError("basic_auth_users:\n\talice: x\n").find("line 2") != std::string::npos);
    QVERIFY(configError("basic_auth_users:\n  - alice\n").find("line 2: basic_auth_users") !=
            std::string::npos);
    try {
      loadWebConfig("/nonexistent/web.yml");
      QFAIL("an unreadable file must be refused");
    } catch (const WebConfigError& e) {
      QVERIFY(std::string(e.what()).find("/nonexistent/web.yml: cannot be read") !=
              std::string::npos);
    }
    // Relative paths are relative to the file's folder, as in the exporter toolkit.
    const auto ok = parseWebConfig(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: "
        "TLS13\n",
        dir_.path().toStdString());
    QVERIFY(ok.tls.has_value());
    QCOMPARE(QString::fromStdString(ok.tls->certFile.string()), path("server.crt"));
    QVERIFY(ok.tls->minVersion == TlsVersion::Tls13);
  }
};

QTEST_GUILESS_MAIN(TestExporterWeb)
#include "tst_exporter_web.moc"

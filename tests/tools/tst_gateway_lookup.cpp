// `idemctl reconcile --lookup`: the UNKNOWN records asked about on a gateway's status endpoint (the
// stand-in, a real process on a free port, answering from a truth file), each answer recorded by
// the gateway's side (a login granted idem_ledger). What the gateway says happened resolves
// SUCCESS, what it says did not FAILED, another amount is mismatched; an answer that does not
// know, an error, a timeout, or a server whose certificate is not trusted decides nothing. The
// configuration's mistakes name the file and the line; credentials are read, sent, never printed.
#include <QtTest>
#include <fstream>
#include <sstream>

#include "idem/protocol_client.hpp"
#include "idemctl.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

// The stand-in, started on a free port and stopped with the object.
class StandIn {
 public:
  explicit StandIn(const QStringList& args) {
    process_.setProgram(QStringLiteral(GATEWAY_STANDIN_BINARY));
    process_.setArguments(QStringList{"--listen", "127.0.0.1:0"} + args);
    process_.start();
    if (!process_.waitForStarted(10000)) return;
    QByteArray out;
    while (!out.contains('\n') && process_.waitForReadyRead(10000)) {
      out += process_.readAllStandardOutput();
    }
    const QByteArray line = out.trimmed();
    if (line.startsWith("listening on 127.0.0.1:"))
      port_ = line.mid(line.lastIndexOf(':') + 1).toInt();
  }
  ~StandIn() { stop(); }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  int port() const { return port_; }
  // What it logged (one line per request); stops it.
  std::string stop() {
    if (process_.state() != QProcess::NotRunning) {
      process_.terminate();
      if (!process_.waitForFinished(5000)) {
        process_.kill();
        process_.waitForFinished(5000);
      }
    }
    log_ += process_.readAllStandardError().toStdString();
    return log_;
  }

 private:
  QProcess process_;
  int port_ = 0;
  std::string log_;
};

}  // namespace

class TestGatewayLookup : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<QTemporaryDir> dir_;
  std::atomic<bool> stop_{false};
  std::string out_, err_;
  std::string writer_, ledger_, reconciler_;

  int idemctl(const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int code = ctl::run(args, {out, err, false}, stop_);
    out_ = out.str();
    err_ = err.str();
    return code;
  }
  bool errSays(const std::string& text) const { return err_.find(text) != std::string::npos; }
  bool outSays(const std::string& text) const { return out_.find(text) != std::string::npos; }
  std::string path(const std::string& name) const {
    return dir_->filePath(QString::fromStdString(name)).toStdString();
  }
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = path(name);
    std::ofstream(p, std::ios::trunc) << content;
    return p;
  }
  // The truth file: what the gateway did with each key.
  std::string truth(const std::vector<std::string>& lines) const {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    return write("truth.jsonl", text);
  }
  static std::string charge(const std::string& key, const std::string& status,
                            long long amountMinor = 2990) {
    return "{\"key\": \"" + key + "\", \"status\": \"" + status +
           "\", \"amount_minor\": " + std::to_string(amountMinor) +
           ", \"currency\": \"cny\", \"id\": \"ch_" + key + "\"}";
  }
  // A configuration for the stand-in at `port`; `more` is appended (its own top-level keys).
  std::string config(int port, const std::string& more = {}, const std::string& scheme = "http",
                     const std::string& name = "lookup.yaml") const {
    return write(name,
                 "gateway: standin\n"
                 "biz_types: [payment]\n"
                 "url: \"" +
                     scheme + "://127.0.0.1:" + std::to_string(port) +
                     "/v1/payments/{key}\"\n"
                     "rate_limit: 100/s\n"
                     "status:\n"
                     "  pointer: /status\n"
                     "  happened: [succeeded]\n"
                     "  not_happened: [failed, canceled]\n"
                     "amount: {pointer: /amount, unit: minor}\n"
                     "currency: {pointer: /currency}\n"
                     "reference: {pointer: /id}\n"
                     "kind: DEBIT\n" +
                     more);
  }
  int lookup(const std::string& configFile) {
    return idemctl({"reconcile", "--lookup", configFile, "--ledger-dsn", db_->dsnAs(ledger_),
                    "--db.dsn", db_->dsnAs(reconciler_)});
  }
  std::string text(const std::string& sql) const {
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].c_str();
  }
  std::string statusOf(const std::string& key) const {
    return text("SELECT status FROM idem.records WHERE idempotency_key = '" + key + "'");
  }
  // A charge whose answer was lost: UNKNOWN, asking amountMinor CNY.
  void lostAnswer(const std::string& key, long long amountMinor = 2990,
                  const std::string& bizType = "payment") {
    pqxx::connection c(db_->dsnAs(writer_));
    ProtocolClient client(c);
    BeginRequest r = test::payRequest(key, "order:" + key, bizType);
    r.requestPayload =
        "{\"amount_minor\": " + std::to_string(amountMinor) + ", \"currency\": \"CNY\"}";
    const BeginResult b = client.begin(r);
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(client.markUnknown(key, 1, "gateway timeout after 5s", *b.claimToken).ok());
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_gateway_lookup");
    writer_ = db_->createLoginRole("agent", "idem_writer");
    ledger_ = db_->createLoginRole("gateway", "idem_ledger");
    reconciler_ = db_->createLoginRole("recon", "idem_reconciler");
  }
  void init() {
    db_->reset();
    // The stand-in carries payments and refunds: its "did not happen" may decide them.
    db_->exec(
        "SELECT idem.declare_gateway('standin', ARRAY['payment', 'refund'], '0', false, '0')");
    dir_ = std::make_unique<QTemporaryDir>();
    QVERIFY(dir_->isValid());
  }
  void cleanupTestCase() { db_.reset(); }

  void theGatewaysAnswersDecide() {
    lostAnswer("pay-ok");
    lostAnswer("pay-no");
    lostAnswer("pay-busy");
    lostAnswer("pay-lie");
    lostAnswer("pay-never");  // a key the gateway never saw: 404, decides nothing by default
    StandIn gateway({"--truth",
                     QString::fromStdString(
                         truth({charge("pay-ok", "succeeded"), charge("pay-no", "failed"),
                                charge("pay-busy", "processing"), charge("pay-lie", "succeeded")})),
                     "--lie-amount", "pay-lie"});
    QVERIFY(gateway.port() > 0);
    QCOMPARE(lookup(config(gateway.port())), 0);
    QVERIFY2(outSays("lookup: asked 5: succeeded 2, failed 1, unknown 1, errors 1; resolved 1 "
                     "SUCCESS, 1 FAILED, mismatched 1"),
             out_.c_str());
    QVERIFY2(outSays("pay-lie: mismatched: "), out_.c_str());
    QVERIFY2(outSays("pay-never: error: GET http://127.0.0.1:"), out_.c_str());
    QVERIFY2(outSays("answered HTTP 404"), out_.c_str());
    QCOMPARE(statusOf("pay-ok"), std::string("SUCCESS"));
    QCOMPARE(statusOf("pay-no"), std::string("FAILED"));
    QCOMPARE(statusOf("pay-busy"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("pay-lie"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("pay-never"), std::string("UNKNOWN"));
    QCOMPARE(text("SELECT evidence->>'source' FROM idem.transitions WHERE idempotency_key = "
                  "'pay-ok' AND to_status = 'SUCCESS'"),
             std::string("lookup"));
    QCOMPARE(text("SELECT evidence->>'source' FROM idem.transitions WHERE idempotency_key = "
                  "'pay-no' AND to_status = 'FAILED'"),
             std::string("lookup"));
    QCOMPARE(text("SELECT kind || ' ' || amount_minor || ' ' || currency || ' ' || external_ref "
                  "FROM idem.fund_flows WHERE biz_id = 'order:pay-ok'"),
             std::string("DEBIT 2990 CNY ch_pay-ok"));
    QCOMPARE(text("SELECT result FROM idem.gateway_events WHERE record_key = 'pay-lie'"),
             std::string("mismatched"));
    QCOMPARE(text("SELECT result FROM idem.gateway_events WHERE record_key = 'pay-busy'"),
             std::string("pending"));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'order:pay-lie'"),
             0LL);

    // The next round asks only what is still UNKNOWN; "no such payment" may be declared an
    // answer that it did not happen.
    QCOMPARE(lookup(config(gateway.port(), "", "http", "lookup.yaml")), 0);
    QVERIFY2(outSays("lookup: asked 3:"), out_.c_str());
    const std::string withNotFound =
        write("lookup-404.yaml",
              "gateway: standin\nbiz_types: [payment]\nurl: \"http://127.0.0.1:" +
                  std::to_string(gateway.port()) +
                  "/v1/payments/{key}\"\nstatus:\n  pointer: /status\n  happened: [succeeded]\n  "
                  "not_happened: [failed]\n  not_found_status: 404\namount: {pointer: /amount}\n"
                  "currency: {pointer: /currency}\nreference: {pointer: /id}\n");
    QCOMPARE(lookup(withNotFound), 0);
    QVERIFY2(outSays("failed 1"), out_.c_str());
    QCOMPARE(statusOf("pay-never"), std::string("FAILED"));
  }

  // A gateway whose status query takes a body: POST, the key escaped for the body's type (JSON
  // string characters, or URL-encoded in a form), the same answers and decisions as a GET.
  void aGatewayAskedByPostAnswers() {
    const std::string quoted = "pay \"post\" \\ 1";  // escaped in a JSON body
    const std::string formed = "pay form/2+x&y=1";   // URL-encoded in a form
    lostAnswer("pay-post");
    lostAnswer(quoted);
    StandIn gateway(
        {"--truth", QString::fromStdString(truth({charge("pay-post", "succeeded"),
                                                  charge("pay \\\"post\\\" \\\\ 1", "failed"),
                                                  charge(formed, "failed")}))});
    QVERIFY(gateway.port() > 0);
    const auto posting = [&](const std::string& name, const std::string& body) {
      return write(name, "gateway: standin\nbiz_types: [payment]\nurl: \"http://127.0.0.1:" +
                             std::to_string(gateway.port()) +
                             "/v1/payments/query\"\nmethod: POST\n" + body +
                             "status:\n  pointer: /status\n  happened: [succeeded]\n"
                             "  not_happened: [failed]\namount: {pointer: /amount}\n"
                             "currency: {pointer: /currency}\nreference: {pointer: /id}\n"
                             "max_per_round: 10\n");
    };
    // JSON: the template writes the quotes, the key's characters are escaped as a JSON string's.
    QCOMPARE(lookup(posting("post-json.yaml", "body: '{\"key\": \"{key}\"}'\n")), 0);
    QVERIFY2(outSays("asked 2: succeeded 1, failed 1, unknown 0, errors 0"), out_.c_str());
    QCOMPARE(statusOf("pay-post"), std::string("SUCCESS"));
    QCOMPARE(statusOf(quoted), std::string("FAILED"));
    // A form: URL-encoded.
    lostAnswer(formed);
    QCOMPARE(
        lookup(posting("post-form.yaml",
                       "body: \"key={key}\"\ncontent_type: application/x-www-form-urlencoded\n")),
        0);
    QVERIFY2(outSays("asked 1: succeeded 0, failed 1, unknown 0, errors 0"), out_.c_str());
    QCOMPARE(statusOf(formed), std::string("FAILED"));
    const std::string log = gateway.stop();
    QVERIFY2(log.find("POST /v1/payments/query -> 200") != std::string::npos, log.c_str());

    // What the configuration may not say.
    QCOMPARE(lookup(posting("post-nobody.yaml", "")), 2);
    QVERIFY2(errSays("post-nobody.yaml:4:9: method: POST needs a body"), err_.c_str());
    QCOMPARE(lookup(posting("post-same.yaml", "body: '{}'\n")), 2);
    QVERIFY2(errSays("url: names neither {key} nor {biz_id}, nor does the body"), err_.c_str());
    QCOMPARE(lookup(posting("post-type.yaml", "body: \"{key}\"\ncontent_type: text/plain\n")), 2);
    QVERIFY2(errSays("content_type: application/json or application/x-www-form-urlencoded"),
             err_.c_str());
    QCOMPARE(lookup(config(1, "body: \"{key}\"\n", "http", "get-body.yaml")), 2);
    QVERIFY2(errSays("body: a GET carries no body"), err_.c_str());
    QCOMPARE(lookup(config(1, "method: PUT\n", "http", "put.yaml")), 2);
    QVERIFY2(errSays("method: a status lookup reads: GET, or POST"), err_.c_str());
  }

  void errorsAndTimeoutsDecideNothing() {
    lostAnswer("pay-e1");
    lostAnswer("pay-e2");
    const std::string facts = truth({charge("pay-e1", "succeeded"), charge("pay-e2", "failed")});
    {
      StandIn failing({"--truth", QString::fromStdString(facts), "--fail-rate", "1"});
      QVERIFY(failing.port() > 0);
      QCOMPARE(lookup(config(failing.port(), "retries: 1\n")), 0);
      QVERIFY2(outSays("lookup: asked 2: succeeded 0, failed 0, unknown 0, errors 2"),
               out_.c_str());
      QVERIFY2(outSays("answered HTTP 500"), out_.c_str());
      QVERIFY2(outSays("decides nothing"), out_.c_str());
    }
    {
      StandIn slow({"--truth", QString::fromStdString(facts), "--delay-ms", "3000"});
      QVERIFY(slow.port() > 0);
      QCOMPARE(lookup(config(slow.port(), "timeout: 200ms\nretries: 0\n")), 0);
      QVERIFY2(outSays("lookup: asked 2: succeeded 0, failed 0, unknown 0, errors 2"),
               out_.c_str());
      QVERIFY2(outSays("no answer within 200ms"), out_.c_str());
    }
    QCOMPARE(statusOf("pay-e1"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("pay-e2"), std::string("UNKNOWN"));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.gateway_events"), 0LL);
    {
      // Nobody listening: refused connections are errors too.
      StandIn gone({"--truth", QString::fromStdString(facts)});
      const int port = gone.port();
      gone.stop();
      QCOMPARE(lookup(config(port, "retries: 0\n")), 0);
      QVERIFY2(outSays("errors 2"), out_.c_str());
      QVERIFY2(outSays("cannot connect to 127.0.0.1:"), out_.c_str());
    }
  }

  // Without `kind`, a "happened" answer is each record's own side effect: one status API
  // serves a payment (its DEBIT) and a refund (its REFUND).
  void eachRecordsOwnSideEffectWithoutAKind() {
    lostAnswer("pay-k");
    lostAnswer("ref-k", 500, "refund");
    StandIn gateway(
        {"--truth", QString::fromStdString(
                        truth({charge("pay-k", "succeeded"), charge("ref-k", "succeeded", 500)}))});
    QVERIFY(gateway.port() > 0);
    std::string withoutKind = config(gateway.port());
    std::string text2;
    {
      std::ifstream in(withoutKind);
      for (std::string line; std::getline(in, line);) {
        if (line == "kind: DEBIT") continue;
        if (line == "biz_types: [payment]") line = "biz_types: [payment, refund]";
        text2 += line + "\n";
      }
    }
    QCOMPARE(lookup(write("kinds.yaml", text2)), 0);
    QVERIFY2(outSays("resolved 2 SUCCESS"), out_.c_str());
    QCOMPARE(text("SELECT string_agg(kind, ' ' ORDER BY biz_id) FROM idem.fund_flows"),
             std::string("DEBIT REFUND"));
  }

  void aThrottledLookupWaitsAndIsAnswered() {
    for (const char* key : {"pay-t1", "pay-t2", "pay-t3"}) lostAnswer(key);
    StandIn gateway(
        {"--truth",
         QString::fromStdString(truth({charge("pay-t1", "succeeded"), charge("pay-t2", "succeeded"),
                                       charge("pay-t3", "succeeded")})),
         "--rate-limit", "1/s"});
    QVERIFY(gateway.port() > 0);
    QCOMPARE(lookup(config(gateway.port(), "retries: 4\n")), 0);
    QVERIFY2(outSays("lookup: asked 3: succeeded 3, failed 0, unknown 0, errors 0; resolved 3 "
                     "SUCCESS"),
             out_.c_str());
    const std::string log = gateway.stop();
    QVERIFY2(log.find("-> 429") != std::string::npos, log.c_str());
  }

  void httpsIsVerified() {
    lostAnswer("pay-tls");
    const QString cert = QString::fromStdString(path("cert.pem"));
    const QString key = QString::fromStdString(path("key.pem"));
    QProcess openssl;
    openssl.start("openssl", {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                              "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                              "subjectAltName=IP:127.0.0.1"});
    QVERIFY(openssl.waitForFinished(60000));
    QCOMPARE(openssl.exitCode(), 0);
    StandIn gateway({"--truth", QString::fromStdString(truth({charge("pay-tls", "succeeded")})),
                     "--tls-cert", cert, "--tls-key", key});
    QVERIFY(gateway.port() > 0);
    // The system's store does not know the certificate: refused, nothing decided.
    QCOMPARE(lookup(config(gateway.port(), "retries: 0\n", "https")), 0);
    QVERIFY2(outSays("errors 1"), out_.c_str());
    QVERIFY2(outSays("TLS handshake with 127.0.0.1 failed: the certificate is not trusted"),
             out_.c_str());
    QCOMPARE(statusOf("pay-tls"), std::string("UNKNOWN"));
    // Trusted through ca_file: answered.
    QCOMPARE(lookup(config(gateway.port(), "ca_file: " + cert.toStdString() + "\n", "https")), 0);
    QVERIFY2(outSays("lookup: asked 1: succeeded 1, failed 0, unknown 0, errors 0; resolved 1 "
                     "SUCCESS"),
             out_.c_str());
    QCOMPARE(statusOf("pay-tls"), std::string("SUCCESS"));
  }

  void credentialsAreSentNeverPrinted() {
    lostAnswer("pay-c1");
    const std::string secret = "sk_test_s3cr3t_never_printed";
    const std::string token = write("token", secret + "\n");
    QVERIFY(QDir().mkpath(QString::fromStdString(path("creds"))));
    write("creds/gw_key", secret + "\n");
    StandIn gateway({"--truth", QString::fromStdString(truth({charge("pay-c1", "processing")})),
                     "--require-auth", QString::fromStdString(token)});
    QVERIFY(gateway.port() > 0);
    // Without the credential: refused by the gateway, an error.
    QCOMPARE(lookup(config(gateway.port(), "retries: 0\n")), 0);
    QVERIFY2(outSays("errors 1") && outSays("answered HTTP 401"), out_.c_str());
    // From the credentials directory.
    QCOMPARE(lookup(config(gateway.port(),
                           "headers:\n  Authorization: \"Bearer ${credential:gw_key}\"\n"
                           "credentials_dir: " +
                               path("creds") + "\n")),
             0);
    QVERIFY2(outSays("unknown 1, errors 0"), out_.c_str());
    QVERIFY(out_.find(secret) == std::string::npos && err_.find(secret) == std::string::npos);
    // From a file named for it.
    QCOMPARE(lookup(config(gateway.port(),
                           "headers:\n  Authorization: \"Bearer ${credential:gw_key}\"\n"
                           "credentials:\n  gw_key: " +
                               token + "\n")),
             0);
    QVERIFY2(outSays("unknown 1, errors 0"), out_.c_str());
    QVERIFY(out_.find(secret) == std::string::npos && err_.find(secret) == std::string::npos);
    const std::string log = gateway.stop();
    QVERIFY(log.find(secret) == std::string::npos);
  }

  void configMistakesNameFileAndLine() {
    // An unknown key, on line 13.
    const std::string typo = config(1, "timeuot: 5s\n", "http", "typo.yaml");
    QCOMPARE(lookup(typo), 2);
    QVERIFY2(errSays("idemctl reconcile: " + typo + ":13:1: timeuot: unknown key"), err_.c_str());
    // A credential that cannot be read, named by the header that wants it (line 13).
    const std::string missing =
        config(1,
               "headers:\n  Authorization: \"Bearer ${credential:nope}\"\ncredentials_dir: " +
                   path("none") + "\n",
               "http", "missing.yaml");
    QCOMPARE(lookup(missing), 2);
    QVERIFY2(errSays(missing + ":14:18: headers.Authorization: credential nope: cannot read " +
                     path("none") + "/nope"),
             err_.c_str());
    const std::string badPointer = write("pointer.yaml",
                                         "gateway: g\nbiz_types: payment\n"
                                         "url: http://h/x/{key}\nstatus:\n"
                                         "  pointer: status\n");
    QCOMPARE(lookup(badPointer), 2);
    QVERIFY2(errSays(badPointer + ":5:12: status.pointer: 'status' is not a JSON pointer"),
             err_.c_str());
    const std::string noKey = write("nokey.yaml",
                                    "gateway: g\nbiz_types: payment\n"
                                    "url: http://h/payments\n");
    QCOMPARE(lookup(noKey), 2);
    QVERIFY2(errSays(noKey + ":3:6: url: names neither {key} nor {biz_id}"), err_.c_str());
    QCOMPARE(idemctl({"reconcile", "--lookup", path("absent.yaml"), "--ledger-dsn", "x"}), 2);
    QVERIFY2(errSays("absent.yaml: cannot open the lookup configuration"), err_.c_str());
    QCOMPARE(idemctl({"reconcile", "--lookup", typo}), 2);
    QVERIFY2(errSays("--lookup needs --ledger-dsn"), err_.c_str());
    QCOMPARE(idemctl({"reconcile", "--ledger-dsn", "x"}), 2);
    QVERIFY2(errSays("--ledger-dsn is for --lookup"), err_.c_str());
    QCOMPARE(idemctl({"reconcile", "--help"}), 0);
    QVERIFY(outSays("--lookup=CONFIG") && outSays("--ledger-dsn=DSN") && outSays("LoadCredential"));
  }

  void onlyTheGatewaysLoginRecordsAnswers() {
    StandIn gateway({"--truth", QString::fromStdString(truth({}))});
    QVERIFY(gateway.port() > 0);
    QCOMPARE(idemctl({"reconcile", "--lookup", config(gateway.port()), "--ledger-dsn",
                      db_->dsnAs(writer_), "--db.dsn", db_->dsnAs(reconciler_)}),
             1);
    QVERIFY2(errSays("is not a member of idem_ledger"), err_.c_str());
  }
};

QTEST_GUILESS_MAIN(TestGatewayLookup)
#include "tst_gateway_lookup.moc"

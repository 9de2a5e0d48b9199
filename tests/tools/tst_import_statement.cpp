// The gateway's word through idemctl, as the gateway's side (a login granted idem_ledger) runs it:
// import-statement with each format's sample, every malformed file refused with its line and
// column and nothing imported, a file imported once however often and however concurrently it is
// sent, the records its lines decide; ingest-callback once per event; declare-gateway by the owner.
#include <QTemporaryDir>
#include <QtTest>
#include <future>
#include <sstream>

#include "idem/protocol_client.hpp"
#include "idemctl.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

class TestImportStatement : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::atomic<bool> stop_{false};
  std::string out_, err_;
  std::string writer_, ledger_;

  struct Run {
    int code = 0;
    std::string out, err;
  };
  Run run(const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int code = ctl::run(args, {out, err, false}, stop_);
    return {code, out.str(), err.str()};
  }
  int idemctl(const std::vector<std::string>& args) {
    const Run r = run(args);
    out_ = r.out;
    err_ = r.err;
    return r.code;
  }
  static std::string sample(const std::string& name) {
    return qEnvironmentVariable("IDEMWATCH_SOURCE_DIR").toStdString() +
           "/tests/shared/data/statements/" + name;
  }
  // import-statement as the gateway's login.
  int import(const std::string& file, const std::string& format, const std::string& gateway,
             std::vector<std::string> more = {}) {
    std::vector<std::string> args{
        "import-statement", sample(file), "--format", format,
        "--gateway",        gateway,      "--db.dsn", db_->dsnAs(ledger_)};
    args.insert(args.end(), more.begin(), more.end());
    return idemctl(args);
  }
  bool errSays(const std::string& text) const { return err_.find(text) != std::string::npos; }
  bool outSays(const std::string& text) const { return out_.find(text) != std::string::npos; }
  long long count(const std::string& sql) const { return db_->scalar(sql); }
  std::string text(const std::string& sql) const {
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].c_str();
  }
  // A charge whose answer was lost: UNKNOWN, asking amountMinor of currency.
  void lostAnswer(const std::string& key, const std::string& bizId, long long amountMinor,
                  const std::string& currency) {
    pqxx::connection c(db_->dsnAs(writer_));
    ProtocolClient client(c);
    BeginRequest r = test::payRequest(key, bizId);
    r.requestPayload = "{\"amount_minor\": " + std::to_string(amountMinor) + ", \"currency\": \"" +
                       currency + "\"}";
    const BeginResult b = client.begin(r);
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(client.markUnknown(key, 1, "gateway timeout after 5s", *b.claimToken).ok());
  }
  std::string statusOf(const std::string& key) const {
    return text("SELECT status FROM idem.records WHERE idempotency_key = '" + key + "'");
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_import_statement");
    writer_ = db_->createLoginRole("agent", "idem_writer");
    ledger_ = db_->createLoginRole("gateway", "idem_ledger");
  }
  void cleanupTestCase() { db_.reset(); }

  void usageErrorsNameTheFlag() {
    QCOMPARE(idemctl({"import-statement", sample("stripe_itemized.csv"), "--gateway", "s"}), 2);
    QVERIFY2(errSays("--format is required: stripe, camt.053, camt.054, adyen, csv"), err_.c_str());
    QCOMPARE(idemctl({"import-statement", sample("stripe_itemized.csv"), "--format", "mt940",
                      "--gateway", "s"}),
             2);
    QVERIFY2(errSays("unknown format 'mt940'"), err_.c_str());
    QCOMPARE(idemctl({"import-statement", sample("wechat_bill.csv"), "--format", "csv", "--gateway",
                      "wechat"}),
             2);
    QVERIFY(errSays("--format csv needs --mapping FILE"));
    QCOMPARE(idemctl({"import-statement", sample("stripe_itemized.csv"), "--format", "stripe",
                      "--gateway", "s", "--final"}),
             2);
    QVERIFY(errSays("--final needs the period"));
    QCOMPARE(idemctl({"import-statement", "--format", "stripe", "--gateway", "s"}), 2);
    QVERIFY(errSays("name one statement file or folder"));
  }

  void eachFormatsSampleImportsItsLines_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("format");
    QTest::addColumn<QStringList>("more");
    QTest::addColumn<int>("lines");
    QTest::newRow("stripe") << "stripe_itemized.csv"
                            << "stripe" << QStringList{} << 6;
    QTest::newRow("camt.053 v02") << "camt053_v02.xml"
                                  << "camt.053" << QStringList{} << -1;
    QTest::newRow("camt.053 v08") << "camt053_v08.xml"
                                  << "camt.053" << QStringList{} << -1;
    QTest::newRow("camt.054 v08") << "camt054_v08.xml"
                                  << "camt.054" << QStringList{} << -1;
    QTest::newRow("adyen") << "adyen_settlement.csv"
                           << "adyen" << QStringList{} << -1;
    QTest::newRow("wechat csv") << "wechat_bill.csv"
                                << "csv"
                                << QStringList{"--mapping",
                                               QString::fromStdString(sample("wechat_bill.yaml"))}
                                << -1;
  }
  void eachFormatsSampleImportsItsLines() {
    QFETCH(QString, file);
    QFETCH(QString, format);
    QFETCH(QStringList, more);
    QFETCH(int, lines);
    const std::string gateway =
        "gw-" + QString(QTest::currentDataTag()).replace(' ', '-').replace('.', '-').toStdString();
    std::vector<std::string> extra;
    for (const QString& m : more) extra.push_back(m.toStdString());
    QCOMPARE(import(file.toStdString(), format.toStdString(), gateway, extra), 0);
    QVERIFY2(outSays("imported as statement"), out_.c_str());
    const long long held =
        count("SELECT count(*) FROM idem.statement_lines WHERE gateway = '" + gateway + "'");
    QVERIFY(held > 0);
    if (lines >= 0) QCOMPARE(held, static_cast<long long>(lines));
    QCOMPARE(count("SELECT line_count FROM idem.statements WHERE gateway = '" + gateway + "'"),
             held);
    // Sent again: nothing changes.
    QCOMPARE(import(file.toStdString(), format.toStdString(), gateway, extra), 0);
    QVERIFY2(outSays("already imported as statement"), out_.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE gateway = '" + gateway + "'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE gateway = '" + gateway + "'"),
             held);
  }

  void aMalformedFileImportsNothing_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("format");
    QTest::addColumn<QString>("where");  // FILE:LINE:COLUMN
    QTest::addColumn<QString>("what");
    QTest::newRow("truncated") << "stripe_truncated.csv"
                               << "stripe"
                               << ":3:106:"
                               << "never closes";
    QTest::newRow("wrong encoding") << "stripe_invalid_utf8.csv"
                                    << "stripe"
                                    << ":3:107:"
                                    << "invalid UTF-8";
    QTest::newRow("missing column") << "stripe_missing_column.csv"
                                    << "stripe"
                                    << ":1:1:"
                                    << "no column 'gross'";
    QTest::newRow("wrong exponent") << "stripe_wrong_exponent.csv"
                                    << "stripe"
                                    << ":3:54:"
                                    << "more decimals than the currency's 0";
    QTest::newRow("too many fields") << "stripe_too_many_fields.csv"
                                     << "stripe"
                                     << ":3:"
                                     << "found 10";
    QTest::newRow("last line cut short") << "stripe_cut_short.csv"
                                         << "stripe"
                                         << ":3:58:"
                                         << "without its line break: it was cut short";
    QTest::newRow("xml cut short") << "camt053_truncated.xml"
                                   << "camt.053"
                                   << ":"
                                   << "";
    QTest::newRow("camt.054 as camt.053") << "camt054_v08.xml"
                                          << "camt.053"
                                          << ":"
                                          << "camt.054";
  }
  void aMalformedFileImportsNothing() {
    QFETCH(QString, file);
    QFETCH(QString, format);
    QFETCH(QString, where);
    QFETCH(QString, what);
    const long long statements = count("SELECT count(*) FROM idem.statements");
    const long long lines = count("SELECT count(*) FROM idem.statement_lines");
    const long long flows = count("SELECT count(*) FROM idem.fund_flows");
    QCOMPARE(import(file.toStdString(), format.toStdString(), "gw-malformed"), 1);
    QVERIFY2(errSays(file.toStdString() + where.toStdString()), err_.c_str());
    QVERIFY2(errSays(what.toStdString()), err_.c_str());
    QVERIFY2(errSays("nothing of the file was imported"), err_.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.statements"), statements);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines"), lines);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), flows);
  }

  // The Stripe sample's three charges, their answers lost: the one asking another amount stays for
  // a person; the refund line gives part of the first back without deciding anything.
  void theStatementDecidesTheLostCharges() {
    lostAnswer("ord-1001-pay-7f3a", "order:1001", 2990, "USD");
    lostAnswer("ord-1002-pay-91c0", "order:1002", 1500, "JPY");
    lostAnswer("ord-1003-pay-2b44", "order:1003", 12000, "KWD");  // the gateway took 12.500
    QCOMPARE(import("stripe_itemized.csv", "stripe", "stripe"), 0);
    QVERIFY2(outSays("resolved 2 record(s) SUCCESS"), out_.c_str());
    QVERIFY2(outSays("mismatched 1"), out_.c_str());
    QVERIFY2(outSays("gateway moved 12500 KWD and the request asked 12000 KWD"), out_.c_str());
    QCOMPARE(statusOf("ord-1001-pay-7f3a"), std::string("SUCCESS"));
    QCOMPARE(statusOf("ord-1002-pay-91c0"), std::string("SUCCESS"));
    QCOMPARE(statusOf("ord-1003-pay-2b44"), std::string("UNKNOWN"));
    QCOMPARE(text("SELECT string_agg(kind || ' ' || amount_minor || ' ' || currency || ' ' || "
                  "external_ref, ', ' ORDER BY id) FROM idem.fund_flows WHERE biz_id = "
                  "'order:1001'"),
             std::string("DEBIT 2990 USD ch_3QhQ2vLkdIwHu7ix0kY5Rz8A, REFUND 1000 USD "
                         "re_3QhQ2vLkdIwHu7ix0Pq7Zi9N"));
    QCOMPARE(text("SELECT evidence->>'source' FROM idem.transitions WHERE idempotency_key = "
                  "'ord-1002-pay-91c0' AND to_status = 'SUCCESS'"),
             std::string("statement"));
  }

  void concurrentImportsOfOneFileImportItOnce() {
    auto one = [&] {
      return run({"import-statement", sample("adyen_settlement.csv"), "--format", "adyen",
                  "--gateway", "adyen-race", "--db.dsn", db_->dsnAs(ledger_)});
    };
    auto a = std::async(std::launch::async, one);
    auto b = std::async(std::launch::async, one);
    const Run ra = a.get();
    const Run rb = b.get();
    QCOMPARE(ra.code, 0);
    QCOMPARE(rb.code, 0);
    const int already = (ra.out.find("already imported") != std::string::npos) +
                        (rb.out.find("already imported") != std::string::npos);
    QCOMPARE(already, 1);
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE gateway = 'adyen-race'"), 1LL);
  }

  // A drop folder: each file once, by name, however often the folder is read; a malformed one is
  // refused alone, the others imported; a file still being written waits.
  void aFolderImportsEachFileOnce() {
    QTemporaryDir drop;
    QFile::copy(QString::fromStdString(sample("stripe_itemized.csv")), drop.filePath("1-day.csv"));
    QFile::copy(QString::fromStdString(sample("stripe_truncated.csv")), drop.filePath("2-cut.csv"));
    QFile::copy(QString::fromStdString(sample("adyen_settlement.csv")),
                drop.filePath("3-day.csv.partial"));
    const std::vector<std::string> args{"import-statement", drop.path().toStdString(),
                                        "--format",         "stripe",
                                        "--gateway",        "stripe-drop",
                                        "--db.dsn",         db_->dsnAs(ledger_)};
    QCOMPARE(idemctl(args), 1);
    QVERIFY2(outSays("1-day.csv: imported as statement"), out_.c_str());
    QVERIFY2(errSays("2-cut.csv:3:106: "), err_.c_str());
    QVERIFY(!outSays("partial") && !errSays("partial"));
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE gateway = 'stripe-drop'"), 1LL);
    QFile::remove(drop.filePath("2-cut.csv"));
    QCOMPARE(idemctl(args), 0);
    QVERIFY2(outSays("1-day.csv: already imported"), out_.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE gateway = 'stripe-drop'"), 1LL);
  }

  void onlyTheGatewaysLoginImports() {
    QCOMPARE(idemctl({"import-statement", sample("stripe_itemized.csv"), "--format", "stripe",
                      "--gateway", "x", "--db.dsn", db_->dsnAs(writer_)}),
             1);
    QVERIFY2(errSays("is not a member of idem_ledger"), err_.c_str());
  }

  void aCallbackResolvesOnceWhateverTheRedeliveries() {
    lostAnswer("ord-cb-1", "order:cb-1", 2990, "CNY");
    const std::vector<std::string> args{"ingest-callback",
                                        "--gateway",
                                        "alipay",
                                        "--event-id",
                                        "notify-77",
                                        "--kind",
                                        "DEBIT",
                                        "--amount",
                                        "29.90",
                                        "--currency",
                                        "CNY",
                                        "--ref",
                                        "2026120122001",
                                        "--key",
                                        "ord-cb-1",
                                        "--db.dsn",
                                        db_->dsnAs(ledger_)};
    QCOMPARE(idemctl(args), 0);
    QVERIFY2(outSays("callback notify-77 of alipay: matched, record ord-cb-1 (SUCCESS), flow "),
             out_.c_str());
    QCOMPARE(idemctl(args), 0);
    QVERIFY2(outSays("received before, matched"), out_.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'order:cb-1'"), 1LL);
    QCOMPARE(idemctl({"ingest-callback", "--gateway", "alipay", "--event-id", "n-78", "--kind",
                      "DEBIT", "--amount", "29.905", "--currency", "CNY", "--key", "k"}),
             2);
    QVERIFY2(errSays("--amount: "), err_.c_str());
  }

  void theOwnerDeclaresAGateway() {
    QCOMPARE(idemctl({"declare-gateway", "wallet", "--biz-types", "payment", "--settlement-delay",
                      "36h", "--absence-is-evidence", "--db.dsn", db_->dsn()}),
             0);
    QVERIFY2(outSays("gateway wallet: carries payment; settlement delay 1d12h"), out_.c_str());
    QCOMPARE(text("SELECT settlement_delay::text || ' ' || absence_is_evidence::text FROM "
                  "idem.gateways WHERE gateway = 'wallet'"),
             std::string("36:00:00 true"));
    QCOMPARE(
        idemctl({"declare-gateway", "wallet", "--absence-is-evidence", "--db.dsn", db_->dsn()}), 2);
    QVERIFY(errSays("--absence-is-evidence needs --biz-types"));
    QCOMPARE(idemctl({"declare-gateway", "wallet", "--db.dsn", db_->dsnAs(ledger_)}), 1);
    QVERIFY2(errSays("permission denied"), err_.c_str());
  }
};

QTEST_GUILESS_MAIN(TestImportStatement)
#include "tst_import_statement.moc"

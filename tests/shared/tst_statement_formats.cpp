// A gateway's statement read as the ledger reads it: each format's sample gives exactly the lines
// it holds, and each malformed file stops the read at its first fault with the line, the column
// and a message naming the problem. The samples are in tests/shared/data/statements/, written
// from each format's public description:
//   stripe_itemized.csv     three charges (USD, JPY, KWD), a refund, a fee, a payout; one quoted
//                           description holds a comma, another doubled quotes and a line break
//   camt053_v02.xml         camt.053.001.02 (<Sts>BOOK</Sts>): a credit, a debit without an
//                           AcctSvcrRef (NOTPROVIDED end-to-end id), a batch of two transactions
//   camt053_v08.xml         camt.053.001.08 (<Sts><Cd>BOOK</Cd></Sts>): an EUR statement with a
//                           credit and a batch, and a KWD statement with a charge
//   camt054_v08.xml         camt.054.001.08 with prefixed elements (ns2:): a JPY credit, a pending
//                           one
//   adyen_settlement.csv    UTF-8 with a byte order mark and CRLF: settled EUR, JPY and USD paid
//                           out in EUR, a refund, a fee, a payout, then an empty record and line
//   wechat_bill.csv         GBK bytes (iconv -f UTF-8 -t GBK), CRLF, every value after a
//                           backtick; read through wechat_bill.yaml. In UTF-8 it reads:
//       交易时间,公众账号ID,商户号,...,微信订单号,商户订单号,...,交易状态,...,货币种类,应结订单金额,...
//       `2026-11-30 09:12:33,...,`4200002026113012345678901234,`ord-4001-pay-88aa,...,`SUCCESS,...
//         `CNY,`88.00,...,`会员年卡,`biz:4001,`0.53,...        (a payment of 88.00 CNY)
//       `2026-11-30 10:47:05,...,`SUCCESS,...,`12.50,...,`咖啡 大杯,...  (a payment of 12.50 CNY)
//       `2026-11-30 18:40:00,...,`REFUND,...,`50300002026113098765432100,`ord-4001-refund-1,
//         `30.00,...                                           (a refund of 30.00 CNY)
//       总交易单数,应结订单总金额,...                            (the summary: not read)
//   wechat_bill_bad_gbk.csv the same bill with a byte 0xFF in the second payment's product name
// and the malformed Stripe files stripe_missing_column (no gross), stripe_wrong_exponent (a JPY
// amount with a decimal), stripe_truncated (cut inside a quoted field), stripe_too_many_fields,
// stripe_invalid_utf8 (a Latin-1 byte), camt053_truncated.xml (cut inside an entry).
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <stdexcept>

#include "idem/statement_formats.hpp"

using namespace idem;

namespace {

QString sample(const char* name) {
  return qEnvironmentVariable("IDEMWATCH_SOURCE_DIR") + "/tests/shared/data/statements/" +
         QString::fromUtf8(name);
}

struct Outcome {
  std::vector<StatementLine> lines;
  std::optional<StatementPeriod> period;
  std::optional<StatementError> error;
};

Outcome read(const QString& path, StatementFormat format, const StatementOptions& options = {}) {
  Outcome outcome;
  try {
    outcome.period = readStatement(path.toStdString(), format, options,
                                   [&](StatementLine&& line) { outcome.lines.push_back(line); });
  } catch (const StatementError& e) {
    outcome.error = e;
  }
  return outcome;
}

// One line's fields in one text, so that a mismatch shows every field at once.
QString describe(const StatementLine& l) {
  QString text = QStringLiteral("line %1 %2 %3 %4 %5 %6")
                     .arg(l.sourceLine)
                     .arg(QString::fromStdString(l.lineId), QString::fromStdString(l.category),
                          QString::fromStdString(l.flowKind.value_or("-")))
                     .arg(l.amountMinor)
                     .arg(QString::fromStdString(l.currency));
  text += l.feeMinor ? QStringLiteral(" fee %1").arg(*l.feeMinor) : QStringLiteral(" fee -");
  text += QStringLiteral(" key %1 biz %2 ref %3 at %4 value %5 %6")
              .arg(QString::fromStdString(l.idempotencyKey), QString::fromStdString(l.bizId),
                   QString::fromStdString(l.gatewayRef), QString::fromStdString(l.bookedAt),
                   QString::fromStdString(l.valueDate),
                   l.booked ? QStringLiteral("booked") : QStringLiteral("not-booked"));
  return text;
}

QString field(const StatementLine& l, std::string_view name) {
  for (const auto& [n, v] : l.fields) {
    if (n == name) return QString::fromStdString(v);
  }
  return QStringLiteral("<absent>");
}

void write(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
  QCOMPARE(file.write(bytes), bytes.size());
}

// Empty when the read failed with a StatementError at this place naming this problem, and whose
// message starts with the file and the place; else what differs.
QString statementErrorMismatch(const Outcome& outcome, const QString& path, std::uint64_t line,
                               std::uint64_t column, const QString& says) {
  if (!outcome.error) return QStringLiteral("the read succeeded");
  const StatementError& e = *outcome.error;
  const QString what = QString::fromUtf8(e.what());
  const QString place =
      line == 0 ? QStringLiteral(": ") : QStringLiteral(":%1:%2: ").arg(line).arg(column);
  if (e.line() != line || e.column() != column || !what.startsWith(path + place) ||
      !QString::fromStdString(e.problem()).contains(says)) {
    return QStringLiteral("expected %1%2...%3, got %4").arg(path, place, says, what);
  }
  return {};
}

#define QVERIFY_STATEMENT_ERROR(...)                               \
  do {                                                             \
    const QString mismatch_ = statementErrorMismatch(__VA_ARGS__); \
    QVERIFY2(mismatch_.isEmpty(), qPrintable(mismatch_));          \
  } while (false)

const QString kStripeHeader = QStringLiteral(
    "balance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,source_id,"
    "description\n");

const QByteArray kCamtHead =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\n"
    "  <BkToCstmrStmt>\n"
    "    <Stmt>\n";
const QByteArray kCamtTail =
    "    </Stmt>\n"
    "  </BkToCstmrStmt>\n"
    "</Document>\n";

}  // namespace

class TestStatementFormats : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QString temp(const char* name) const { return dir_.filePath(QString::fromUtf8(name)); }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void formatNamesAreTheCommandLinesWords() {
    QCOMPARE(statementFormatFromName("stripe"), std::optional(StatementFormat::StripeItemized));
    QCOMPARE(statementFormatFromName("camt.053"), std::optional(StatementFormat::Camt053));
    QCOMPARE(statementFormatFromName("camt.054"), std::optional(StatementFormat::Camt054));
    QCOMPARE(statementFormatFromName("adyen"), std::optional(StatementFormat::AdyenSettlement));
    QCOMPARE(statementFormatFromName("csv"), std::optional(StatementFormat::MappedCsv));
    QCOMPARE(statementFormatFromName("camt"), std::optional<StatementFormat>());
    QCOMPARE(statementFormatName(StatementFormat::Camt054), std::string_view("camt.054"));
    QCOMPARE(statementFormatNames(), std::string("stripe, camt.053, camt.054, adyen, csv"));
  }

  // --- Stripe ---------------------------------------------------------------------------------

  void stripeChargeCarriesItsKey() {
    const Outcome o = read(sample("stripe_itemized.csv"), StatementFormat::StripeItemized);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    QCOMPARE(o.lines.size(), std::size_t(6));
    QVERIFY(!o.period);
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 2 txn_3QhQ2vLkdIwHu7ix0x9Ak1bC charge DEBIT 2990 USD fee 117 "
                            "key ord-1001-pay-7f3a biz order:1001 ref ch_3QhQ2vLkdIwHu7ix0kY5Rz8A "
                            "at 2026-11-30T09:15:02Z value 2026-12-02 booked"));
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 3 txn_3QhQ4bLkdIwHu7ix1Rd0Sp2E charge DEBIT 1500 JPY fee 84 "
                            "key ord-1002-pay-91c0 biz order:1002 ref ch_3QhQ4bLkdIwHu7ix1Jt6Wm3F "
                            "at 2026-11-30T10:02:45Z value 2026-12-02 booked"));
    // No charge_id (a non-card payment): the source is the reference. KWD has three decimals.
    QCOMPARE(describe(o.lines[2]),
             QStringLiteral("line 5 txn_3QhQ7cLkdIwHu7ix2Kw9Te4H charge DEBIT 12500 KWD fee 463 "
                            "key ord-1003-pay-2b44 biz order:1003 ref py_3QhQ7cLkdIwHu7ix2Ha8Uf6J "
                            "at 2026-11-30T11:20:00Z value 2026-12-03 booked"));
  }

  void stripeRefundIsReferencedByItsRefundId() {
    const Outcome o = read(sample("stripe_itemized.csv"), StatementFormat::StripeItemized);
    QCOMPARE(o.lines.size(), std::size_t(6));
    // A negative gross is a magnitude: the direction is the kind.
    QCOMPARE(describe(o.lines[3]),
             QStringLiteral("line 6 txn_1QhR0dLkdIwHu7ix3Lx4Yh8M refund REFUND 1000 USD fee 0 "
                            "key ord-1001-pay-7f3a biz order:1001 ref re_3QhQ2vLkdIwHu7ix0Pq7Zi9N "
                            "at 2026-11-30T14:05:11Z value 2026-11-30 booked"));
  }

  void stripeFeesAndPayoutsAreNoFundFlow() {
    const Outcome o = read(sample("stripe_itemized.csv"), StatementFormat::StripeItemized);
    QCOMPARE(o.lines.size(), std::size_t(6));
    QCOMPARE(describe(o.lines[4]),
             QStringLiteral("line 7 txn_1QhR3eLkdIwHu7ix4Mz5Aj0P fee - 200 USD fee 0 key  biz  "
                            "ref ft_1QhR3eLkdIwHu7ixQn6Bk1R at 2026-11-30T23:59:59Z "
                            "value 2026-11-30 booked"));
    QCOMPARE(describe(o.lines[5]),
             QStringLiteral("line 8 txn_1QhS1fLkdIwHu7ix5Na6Cl2S payout - 1673 USD fee 0 key  "
                            "biz  ref po_1QhS1fLkdIwHu7ixRo7Dm3T at 2026-12-01T02:10:00Z "
                            "value 2026-12-01 booked"));
  }

  void stripeQuotedFieldsKeepCommasQuotesAndLineBreaks() {
    const Outcome o = read(sample("stripe_itemized.csv"), StatementFormat::StripeItemized);
    QCOMPARE(o.lines.size(), std::size_t(6));
    QCOMPARE(field(o.lines[0], "description"), QStringLiteral("Order 1001, two items"));
    QCOMPARE(field(o.lines[1], "description"), QStringLiteral("Gift \"Deluxe\" box\ngift-wrapped"));
    // Every column is kept as the evidence, the ones the ledger does not read too.
    QCOMPARE(o.lines[0].fields.size(), std::size_t(17));
    QCOMPARE(field(o.lines[0], "card_brand"), QStringLiteral("visa"));
    QCOMPARE(field(o.lines[0], "payment_metadata[biz_id]"), QStringLiteral("order:1001"));
    QCOMPARE(o.lines[0].fields.front().first, std::string("balance_transaction_id"));
  }

  void stripeKeyMetadataFollowsTheOptions() {
    StatementOptions options;
    options.keyMetadata = "biz_id";
    options.bizIdMetadata = "absent";
    const Outcome o = read(sample("stripe_itemized.csv"), StatementFormat::StripeItemized, options);
    QCOMPARE(o.lines.size(), std::size_t(6));
    QCOMPARE(o.lines[0].idempotencyKey, std::string("order:1001"));
    QCOMPARE(o.lines[0].bizId, std::string());
  }

  void stripeMissingColumnIsNamed() {
    const QString path = sample("stripe_missing_column.csv");
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 1, 1, QStringLiteral("the header has no column 'gross'"));
    QVERIFY(o.lines.empty());
  }

  // The lines before the fault may have been delivered (the importer discards them); nothing
  // after it is.
  void stripeAmountWithTooManyDecimalsStopsTheRead() {
    const QString path = sample("stripe_wrong_exponent.csv");
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(
        o, path, 3, 54,
        QStringLiteral("gross: amount '1500.5' JPY: more decimals than the currency's 0"));
    QCOMPARE(o.lines.size(), std::size_t(1));
    QCOMPARE(o.lines[0].lineId, std::string("txn_1QhT1bLkdIwHu7ix7Qd9Fp6W"));
  }

  void stripeTruncatedFileNamesWhereTheQuoteOpened() {
    const QString path = sample("stripe_truncated.csv");
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 3, 106,
                            QStringLiteral("the quoted field that opens here never closes"));
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  void stripeRowWithTooManyFieldsIsRefused() {
    const QString path = sample("stripe_too_many_fields.csv");
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 3, 117,
                            QStringLiteral("expected 9 fields as the header has, found 10"));
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  void stripeRowWithTooFewFieldsIsRefusedAtItsEnd() {
    const QString path = temp("stripe_too_few.csv");
    write(path, (kStripeHeader + "txn_1,2026-11-30 09:15:02,usd,29.90,1.17\n").toUtf8());
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 2, 41,
                            QStringLiteral("expected 9 fields as the header has, found 5"));
  }

  void stripeInvalidUtf8IsRefusedAtItsByte() {
    const QString path = sample("stripe_invalid_utf8.csv");
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 3, 107, QStringLiteral("invalid UTF-8 byte 0xE9"));
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  void stripeBadDatesAndCurrenciesAreRefusedAtTheirField_data() {
    QTest::addColumn<QString>("row");
    QTest::addColumn<int>("column");
    QTest::addColumn<QString>("says");
    QTest::newRow("no such day") << "txn_1,2026-11-31 09:15:02,usd,1.00,0,1.00,charge,ch_1,x" << 7
                                 << "created_utc: '2026-11-31 09:15:02' is not a UTC date-time";
    QTest::newRow("not a date") << "txn_1,yesterday,usd,1.00,0,1.00,charge,ch_1,x" << 7
                                << "created_utc: 'yesterday'";
    QTest::newRow("unknown currency") << "txn_1,2026-11-30 09:15:02,usx,1.00,0,1.00,charge,ch_1,x"
                                      << 27 << "currency: 'usx' is not an ISO 4217 currency code";
    QTest::newRow("fee not a number")
        << "txn_1,2026-11-30 09:15:02,usd,1.00,\"1,5\",0.95,charge,ch_1,x" << 36
        << "fee: amount '1,5'";
    QTest::newRow("empty id") << ",2026-11-30 09:15:02,usd,1.00,0,1.00,charge,ch_1,x" << 1
                              << "balance_transaction_id: empty";
  }
  void stripeBadDatesAndCurrenciesAreRefusedAtTheirField() {
    QFETCH(QString, row);
    QFETCH(int, column);
    QFETCH(QString, says);
    const QString path = temp("stripe_bad_field.csv");
    write(path, (kStripeHeader + row + "\n").toUtf8());
    const Outcome o = read(path, StatementFormat::StripeItemized);
    QVERIFY_STATEMENT_ERROR(o, path, 2, column, says);
  }

  void emptyAndMissingFilesAreRefusedAsAWhole() {
    const QString empty = temp("empty.csv");
    write(empty, "\xEF\xBB\xBF\r\n\n");
    QVERIFY_STATEMENT_ERROR(read(empty, StatementFormat::StripeItemized), empty, 0, 0,
                            QStringLiteral("the file is empty"));
    QVERIFY_STATEMENT_ERROR(read(empty, StatementFormat::Camt053), empty, 0, 0,
                            QStringLiteral("the file is empty"));
    const QString missing = temp("no_such_file.csv");
    QVERIFY_STATEMENT_ERROR(read(missing, StatementFormat::AdyenSettlement), missing, 0, 0,
                            QStringLiteral("cannot open"));
    QVERIFY_STATEMENT_ERROR(read(missing, StatementFormat::Camt054), missing, 0, 0,
                            QStringLiteral("cannot open"));
  }

  void callbackExceptionsPassThrough() {
    bool thrown = false;
    int calls = 0;
    try {
      readStatement(sample("stripe_itemized.csv").toStdString(), StatementFormat::StripeItemized,
                    {}, [&](StatementLine&&) {
                      ++calls;
                      throw std::logic_error("the importer stops");
                    });
    } catch (const std::logic_error& e) {
      thrown = QString::fromUtf8(e.what()) == QStringLiteral("the importer stops");
    }
    QVERIFY(thrown);
    QCOMPARE(calls, 1);
  }

  void largeStripeFileStreams() {
    constexpr int kLines = 200000;
    const QString path = temp("large_stripe.csv");
    {
      QFile file(path);
      QVERIFY(file.open(QIODevice::WriteOnly));
      QByteArray chunk;
      chunk +=
          "balance_transaction_id,created_utc,available_on_utc,currency,gross,fee,net,"
          "reporting_category,source_id,description,charge_id,payment_intent_id,"
          "payment_metadata[idempotency_key],payment_metadata[biz_id]\n";
      for (int i = 0; i < kLines; ++i) {
        const QByteArray n = QByteArray::number(i);
        chunk += "txn_3QhQ2vLkdIwHu7ix" + n + ",2026-11-30 09:15:02,2026-12-02 00:00:00,usd," +
                 QByteArray::number(1 + i % 5000) + ".99,0.59,1.40,charge,ch_3QhQ2vLkdIwHu7ix" + n +
                 ",\"Order " + n + ", web\",ch_3QhQ2vLkdIwHu7ix" + n + ",pi_3QhQ2vLkdIwHu7ix" + n +
                 ",ord-" + n + "-pay,order:" + n + "\n";
        if (chunk.size() > (1 << 20)) {
          QCOMPARE(file.write(chunk), chunk.size());
          chunk.clear();
        }
      }
      QCOMPARE(file.write(chunk), chunk.size());
    }
    std::uint64_t count = 0;
    std::int64_t sum = 0;
    std::string last;
    QElapsedTimer timer;
    timer.start();
    readStatement(path.toStdString(), StatementFormat::StripeItemized, {},
                  [&](StatementLine&& line) {
                    ++count;
                    sum += line.amountMinor;
                    last = std::move(line.idempotencyKey);
                  });
    const qint64 ms = std::max<qint64>(1, timer.elapsed());
    QCOMPARE(count, std::uint64_t(kLines));
    QCOMPARE(last, std::string("ord-199999-pay"));
    std::int64_t expected = 0;
    for (int i = 0; i < kLines; ++i) expected += (1 + i % 5000) * 100 + 99;
    QCOMPARE(sum, expected);
    qInfo("Stripe itemized: %d lines in %lld ms, %lld lines/s", kLines, ms,
          static_cast<long long>(kLines) * 1000 / ms);
  }

  // --- camt -----------------------------------------------------------------------------------

  void camt053Version02ReadsEntriesAndBatches() {
    const Outcome o = read(sample("camt053_v02.xml"), StatementFormat::Camt053);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    QCOMPARE(o.lines.size(), std::size_t(4));
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 28 2026113000001234 PMNT/RCDT/ESCT DEBIT 14990 EUR fee - key "
                            "ord-2001-pay-c41e biz  ref TX2026113000001234 at 2026-11-30 "
                            "value 2026-11-30 booked"));
    // No AcctSvcrRef: the NtryRef names the entry; NOTPROVIDED is no key.
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 54 NTRY-0002 PMNT/ICDT/ESCT CREDIT 2500 EUR fee - key  biz  "
                            "ref NTRY-0002 at 2026-11-30 value 2026-12-01 booked"));
    // A batch: one line per transaction, at the transaction's line, with its own amount.
    QCOMPARE(describe(o.lines[2]),
             QStringLiteral("line 91 2026113000001240/1 PMNT/RCDT DEBIT 12000 EUR fee - key "
                            "ord-2002-pay-5d10 biz  ref TX2026113000001241 "
                            "at 2026-11-30T15:42:10+01:00 value 2026-11-30 booked"));
    QCOMPARE(describe(o.lines[3]),
             QStringLiteral("line 98 2026113000001240/2 PMNT/RCDT DEBIT 18000 EUR fee - key "
                            "ord-2003-pay-9e77 biz  ref TX2026113000001242 "
                            "at 2026-11-30T15:42:10+01:00 value 2026-11-30 booked"));
    QCOMPARE(field(o.lines[0], "TxDtls/RmtInf/Ustrd"), QStringLiteral("Invoice 2001 Acme Shop"));
    QCOMPARE(field(o.lines[0], "Acct/Id/IBAN"), QStringLiteral("DE89370400440532013000"));
    QVERIFY(o.period);
    QCOMPARE(o.period->from, std::string("2026-11-30T00:00:00+01:00"));
    QCOMPARE(o.period->to, std::string("2026-11-30T23:59:59+01:00"));
  }

  void camt053Version08ReadsSeveralStatements() {
    const Outcome o = read(sample("camt053_v08.xml"), StatementFormat::Camt053);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    QCOMPARE(o.lines.size(), std::size_t(4));
    // A single TxDtls without its own AcctSvcrRef: the entry's is the reference.
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 20 ABNA2026113000000511 PMNT/RCDT/SDVA DEBIT 5900 EUR fee - key "
                            "ord-5001-pay-aa01 biz  ref ABNA2026113000000511 "
                            "at 2026-11-30T10:15:42Z value 2026-11-30 booked"));
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 63 ABNA2026113000000520/1 PMNT/ICDT/ESCT CREDIT 1550 EUR fee - "
                            "key ord-5002-refund-1 biz  ref ABNA2026113000000521 at 2026-11-30 "
                            "value 2026-11-30 booked"));
    QCOMPARE(describe(o.lines[2]),
             QStringLiteral("line 71 ABNA2026113000000520/2 PMNT/ICDT/ESCT CREDIT 2450 EUR fee - "
                            "key ord-5003-refund-1 biz  ref ABNA2026113000000522 at 2026-11-30 "
                            "value 2026-11-30 booked"));
    QCOMPARE(describe(o.lines[3]),
             QStringLiteral("line 93 CBKU-KW-000771 ACMT/MDOP/CHRG CREDIT 1250 KWD fee - key  "
                            "biz  ref CBKU-KW-000771 at 2026-11-30T13:00:00+03:00 "
                            "value 2026-11-30 booked"));
    QCOMPARE(field(o.lines[0], "TxDtls/Refs/UETR"),
             QStringLiteral("8a562c67-ca16-48ba-b074-65581be6f011"));
    QCOMPARE(field(o.lines[3], "Stmt/Id"),
             QStringLiteral("KW81CBKU0000000000001234560101-20261130"));
    // Two statements of different periods (in different offsets): the file declares none, since
    // their union may have gaps and text does not order times of different offsets.
    QVERIFY(!o.period);
  }

  void camt054ReadsPrefixedElementsAndPendingEntries() {
    const Outcome o = read(sample("camt054_v08.xml"), StatementFormat::Camt054);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    QCOMPARE(o.lines.size(), std::size_t(2));
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 19 MIZU-20261130-000318 CRDT DEBIT 15000 JPY fee - key "
                            "ord-6001-pay-77f2 biz  ref MIZU-20261130-000318 "
                            "at 2026-11-30T13:41:07+09:00 value 2026-11-30 booked"));
    // Pending: read, never booked, no booking date yet.
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 37 JP-0002 CRDT DEBIT 3000 JPY fee - key ord-6002-pay-13c9 "
                            "biz  ref JP-0002 at  value 2026-12-01 not-booked"));
    QVERIFY(o.period);
    QCOMPARE(o.period->from, std::string("2026-11-30T13:00:00+09:00"));
    QCOMPARE(o.period->to, std::string("2026-11-30T14:00:00+09:00"));
  }

  void camtCreditAndDebitKindsFollowTheOptions() {
    StatementOptions options;
    options.camtCreditKind = "REFUND";
    options.camtDebitKind = "CAPTURE";
    const Outcome o = read(sample("camt053_v02.xml"), StatementFormat::Camt053, options);
    QCOMPARE(o.lines.size(), std::size_t(4));
    QCOMPARE(o.lines[0].flowKind, std::optional<std::string>("REFUND"));
    QCOMPARE(o.lines[1].flowKind, std::optional<std::string>("CAPTURE"));
  }

  void camt054GivenAsCamt053IsRefusedNamingTheNamespace() {
    const QString path = sample("camt054_v08.xml");
    const Outcome o = read(path, StatementFormat::Camt053);
    QVERIFY_STATEMENT_ERROR(
        o, path, 2, 1,
        QStringLiteral("Document has the namespace urn:iso:std:iso:20022:tech:xsd:camt.054.001.08, "
                       "not a camt.053 message: camt.053 reads "
                       "urn:iso:std:iso:20022:tech:xsd:camt.053.001.02 to .001.13"));
    QVERIFY(o.lines.empty());
  }

  void camtUnknownVersionIsRefused_data() {
    QTest::addColumn<QString>("ns");
    QTest::newRow("too new") << "urn:iso:std:iso:20022:tech:xsd:camt.053.001.14";
    QTest::newRow("too old") << "urn:iso:std:iso:20022:tech:xsd:camt.053.001.01";
    QTest::newRow("pain") << "urn:iso:std:iso:20022:tech:xsd:pain.001.001.09";
  }
  void camtUnknownVersionIsRefused() {
    QFETCH(QString, ns);
    QByteArray xml = kCamtHead + kCamtTail;
    xml.replace("urn:iso:std:iso:20022:tech:xsd:camt.053.001.08", ns.toUtf8());
    const QString path = temp("camt_version.xml");
    write(path, xml);
    QVERIFY_STATEMENT_ERROR(
        read(path, StatementFormat::Camt053), path, 2, 1,
        QStringLiteral("Document has the namespace %1, not a camt.053").arg(ns));
  }

  void camtTruncatedFileIsRefusedWhereItEnds() {
    const QString path = sample("camt053_truncated.xml");
    const Outcome o = read(path, StatementFormat::Camt053);
    QVERIFY_STATEMENT_ERROR(o, path, 82, 34, QStringLiteral("XML is not well-formed"));
    QVERIFY(o.error->problem().find("truncated?") != std::string::npos);
    // The document is parsed whole before any line is read: nothing is delivered.
    QVERIFY(o.lines.empty());
  }

  void camtEntryFaultsAreRefusedAtTheirElement_data() {
    QTest::addColumn<QByteArray>("entry");
    QTest::addColumn<int>("line");
    QTest::addColumn<int>("column");
    QTest::addColumn<QString>("says");
    QTest::newRow("no reference") << QByteArray(
                                         "      <Ntry>\n"
                                         "        <Amt Ccy=\"EUR\">1.00</Amt>\n"
                                         "        <CdtDbtInd>CRDT</CdtDbtInd>\n"
                                         "        <Sts><Cd>BOOK</Cd></Sts>\n"
                                         "      </Ntry>\n")
                                  << 5 << 7 << "Ntry has neither AcctSvcrRef nor NtryRef";
    QTest::newRow("JPY with decimals") << QByteArray(
                                              "      <Ntry>\n"
                                              "        <NtryRef>1</NtryRef>\n"
                                              "        <Amt Ccy=\"JPY\">1500.5</Amt>\n"
                                              "        <CdtDbtInd>CRDT</CdtDbtInd>\n"
                                              "        <Sts><Cd>BOOK</Cd></Sts>\n"
                                              "      </Ntry>\n")
                                       << 7 << 9 << "Ntry/Amt: amount '1500.5' JPY: more decimals";
    QTest::newRow("unknown currency") << QByteArray(
                                             "      <Ntry>\n"
                                             "        <NtryRef>1</NtryRef>\n"
                                             "        <Amt Ccy=\"EUX\">1.00</Amt>\n"
                                             "      </Ntry>\n")
                                      << 7 << 9 << "Ntry/Amt: Ccy 'EUX' is not an ISO 4217";
    QTest::newRow("bad indicator") << QByteArray(
                                          "      <Ntry>\n"
                                          "        <NtryRef>1</NtryRef>\n"
                                          "        <Amt Ccy=\"EUR\">1.00</Amt>\n"
                                          "        <CdtDbtInd>CREDIT</CdtDbtInd>\n"
                                          "      </Ntry>\n")
                                   << 8 << 9 << "'CREDIT', expected CRDT or DBIT";
    QTest::newRow("bad date") << QByteArray(
                                     "      <Ntry>\n"
                                     "        <NtryRef>1</NtryRef>\n"
                                     "        <Amt Ccy=\"EUR\">1.00</Amt>\n"
                                     "        <CdtDbtInd>CRDT</CdtDbtInd>\n"
                                     "        <Sts><Cd>BOOK</Cd></Sts>\n"
                                     "        <BookgDt><Dt>2026-02-30</Dt></BookgDt>\n"
                                     "      </Ntry>\n")
                              << 10 << 18 << "BookgDt/Dt: '2026-02-30' is not a date";
  }
  void camtEntryFaultsAreRefusedAtTheirElement() {
    QFETCH(QByteArray, entry);
    QFETCH(int, line);
    QFETCH(int, column);
    QFETCH(QString, says);
    const QByteArray good =
        "      <Ntry>\n"
        "        <NtryRef>0</NtryRef>\n"
        "        <Amt Ccy=\"EUR\">2.00</Amt>\n"
        "        <CdtDbtInd>CRDT</CdtDbtInd>\n"
        "        <Sts><Cd>BOOK</Cd></Sts>\n"
        "      </Ntry>\n";
    // The good entry first: the fault is in the second (lines 5 to 10 are the good one).
    const QString path = temp("camt_entry.xml");
    write(path, kCamtHead + good + entry + kCamtTail);
    const Outcome o = read(path, StatementFormat::Camt053);
    QVERIFY_STATEMENT_ERROR(o, path, line + 6, column, says);
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  // --- Adyen ----------------------------------------------------------------------------------

  void adyenSettledLineCarriesTheMerchantReference() {
    const Outcome o = read(sample("adyen_settlement.csv"), StatementFormat::AdyenSettlement);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    // The byte order mark, CRLF and the empty record and line at the end are no lines.
    QCOMPARE(o.lines.size(), std::size_t(6));
    // Fees are the commission, markup, scheme fees and interchange: 0.12+0.06+0.10+0.79.
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 2 8816398712345678/Settled/8816398712345678 Settled DEBIT 5900 "
                            "EUR fee 107 key ord-3001-pay-1a2b biz  ref 8816398712345678 "
                            "at 2026-11-30T10:15:42+01:00 value  booked"));
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 3 8816398712345679/Settled/8816398712345679 Settled DEBIT 4800 "
                            "JPY fee 155 key ord-3002-pay-3c4d biz  ref 8816398712345679 "
                            "at 2026-11-30T11:00:05+01:00 value  booked"));
    // Paid in USD, settled in EUR: the fees are in another currency than the amount, so none.
    QCOMPARE(describe(o.lines[2]),
             QStringLiteral("line 4 8816398712345680/Settled/8816398712345680 Settled DEBIT 10000 "
                            "USD fee - key ord-3003-pay-5e6f biz  ref 8816398712345680 "
                            "at 2026-11-30T12:30:00+01:00 value  booked"));
    QCOMPARE(field(o.lines[0], "Reserved4"), QString());
    QCOMPARE(field(o.lines[0], "Company Account"), QStringLiteral("AcmeCompany"));
  }

  void adyenRefundIsReferencedByItsModification() {
    const Outcome o = read(sample("adyen_settlement.csv"), StatementFormat::AdyenSettlement);
    QCOMPARE(o.lines.size(), std::size_t(6));
    QCOMPARE(describe(o.lines[3]),
             QStringLiteral("line 5 8816398712345678/Refunded/8816398799990001 Refunded REFUND "
                            "2000 EUR fee 12 key ord-3001-refund-1 biz  ref 8816398799990001 "
                            "at 2026-11-30T16:30:00+01:00 value  booked"));
    // Fees and payouts have net amounts only.
    QCOMPARE(describe(o.lines[4]),
             QStringLiteral("line 6 /Fee/Transaction Fees November 2026 Fee - 350 EUR fee - key  "
                            "biz  ref Transaction Fees November 2026 "
                            "at 2026-11-30T23:59:00+01:00 value  booked"));
    QCOMPARE(describe(o.lines[5]),
             QStringLiteral("line 7 /MerchantPayout/Payout of batch 112 MerchantPayout - 5000 EUR "
                            "fee - key  biz  ref Payout of batch 112 at 2026-12-01T08:00:00+01:00 "
                            "value  booked"));
  }

  void adyenUnknownTimeZoneIsRefused() {
    QFile in(sample("adyen_settlement.csv"));
    QVERIFY(in.open(QIODevice::ReadOnly));
    QByteArray bytes = in.readAll();
    const qsizetype second = bytes.indexOf("\r\n", bytes.indexOf("\r\n") + 2);
    bytes.replace(bytes.indexOf(",CET,", second), 5, ",XYZ,");
    const QString path = temp("adyen_zone.csv");
    write(path, bytes);
    const Outcome o = read(path, StatementFormat::AdyenSettlement);
    QVERIFY_STATEMENT_ERROR(o, path, 3, 82, QStringLiteral("TimeZone: unknown zone 'XYZ'"));
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  // --- mapped CSV -----------------------------------------------------------------------------

  void wechatBillIsReadThroughItsMapping() {
    StatementOptions options;
    options.mappingFile = sample("wechat_bill.yaml").toStdString();
    const Outcome o = read(sample("wechat_bill.csv"), StatementFormat::MappedCsv, options);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    // The summary after the data (总交易单数) ends it.
    QCOMPARE(o.lines.size(), std::size_t(3));
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 2 4200002026113012345678901234 SUCCESS DEBIT 8800 CNY fee 53 key "
                            "ord-4001-pay-88aa biz biz:4001 ref 4200002026113012345678901234 "
                            "at 2026-11-30T09:12:33+08:00 value  booked"));
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 3 4200002026113012345678905678 SUCCESS DEBIT 1250 CNY fee 8 key "
                            "ord-4002-pay-19bc biz biz:4002 ref 4200002026113012345678905678 "
                            "at 2026-11-30T10:47:05+08:00 value  booked"));
    // A refund takes its own id, amount and key from the columns its kind names.
    QCOMPARE(describe(o.lines[2]),
             QStringLiteral("line 4 50300002026113098765432100 REFUND REFUND 3000 CNY fee 18 key "
                            "ord-4001-refund-1 biz biz:4001 ref 50300002026113098765432100 "
                            "at 2026-11-30T18:40:00+08:00 value  booked"));
    // GBK becomes UTF-8, the backtick is gone.
    QCOMPARE(field(o.lines[1], "商品名称"), QStringLiteral("咖啡 大杯"));
    QCOMPARE(field(o.lines[0], "交易时间"), QStringLiteral("2026-11-30 09:12:33"));
  }

  void wechatBillWithInvalidGbkIsRefusedAtItsByte() {
    StatementOptions options;
    options.mappingFile = sample("wechat_bill.yaml").toStdString();
    const QString path = sample("wechat_bill_bad_gbk.csv");
    const Outcome o = read(path, StatementFormat::MappedCsv, options);
    QVERIFY_STATEMENT_ERROR(o, path, 3, 217, QStringLiteral("invalid GBK byte 0xFF"));
    QCOMPARE(o.lines.size(), std::size_t(1));
  }

  void gbkBillReadAsUtf8IsRefused() {
    QFile in(sample("wechat_bill.yaml"));
    QVERIFY(in.open(QIODevice::ReadOnly));
    QByteArray yaml = in.readAll();
    yaml.replace("encoding: GBK\n", "");
    const QString mapping = temp("wechat_utf8.yaml");
    write(mapping, yaml);
    StatementOptions options;
    options.mappingFile = mapping.toStdString();
    const QString path = sample("wechat_bill.csv");
    // 交易时间 in GBK begins with 0xBD, which UTF-8 only allows inside a character.
    QVERIFY_STATEMENT_ERROR(read(path, StatementFormat::MappedCsv, options), path, 1, 1,
                            QStringLiteral("invalid UTF-8 byte 0xBD"));
  }

  void alipayLikeBillSkipsCommentsAndTakesAFixedCurrency() {
    const QString path = temp("alipay.csv");
    write(path,
          "#支付宝业务明细查询\n"
          "#账号：[20880012345678900156]\n"
          "支付宝交易号;商户订单号;业务类型;完成时间;订单金额（元）;服务费（元）;退款批次号\n"
          "2026113022001412340500012345;ord-7001-pay;交易;2026/11/30 12:00:01;66.60;-0.40;\n"
          "2026113022001412340500012345;ord-7001-pay;退款;2026/11/30 15:00:00;-6.60;0.04;"
          "2026113022001412340500012345_R1\n"
          "#-----------------------------------------业务明细列表结束\n");
    const QString mapping = temp("alipay.yaml");
    write(mapping,
          "delimiter: \";\"\n"
          "comment_prefix: \"#\"\n"
          "currency: cny\n"
          "booked_at_format: \"%Y/%m/%d %H:%M:%S\"\n"
          "timezone: \"+0800\"\n"
          "columns:\n"
          "  line_id: 支付宝交易号\n"
          "  idempotency_key: 商户订单号\n"
          "  amount: 订单金额（元）\n"
          "  fee: 服务费（元）\n"
          "  booked_at: 完成时间\n"
          "  category: 业务类型\n"
          "kinds:\n"
          "  交易: DEBIT\n"
          "  退款: {kind: REFUND, columns: {line_id: 退款批次号}}\n");
    StatementOptions options;
    options.mappingFile = mapping.toStdString();
    const Outcome o = read(path, StatementFormat::MappedCsv, options);
    QVERIFY2(!o.error, o.error ? o.error->what() : "");
    QCOMPARE(o.lines.size(), std::size_t(2));
    QCOMPARE(describe(o.lines[0]),
             QStringLiteral("line 4 2026113022001412340500012345 交易 DEBIT 6660 CNY fee 40 key "
                            "ord-7001-pay biz  ref  at 2026-11-30T12:00:01+08:00 value  booked"));
    QCOMPARE(describe(o.lines[1]),
             QStringLiteral("line 5 2026113022001412340500012345_R1 退款 REFUND 660 CNY fee 4 key "
                            "ord-7001-pay biz  ref  at 2026-11-30T15:00:00+08:00 value  booked"));
  }

  void mappingFaultsNameTheMappingFileAndLine_data() {
    QTest::addColumn<QByteArray>("yaml");
    QTest::addColumn<int>("line");
    QTest::addColumn<int>("column");
    QTest::addColumn<QString>("says");
    const QByteArray head = "encoding: GBK\nstrip_prefix: \"`\"\ntimezone: \"+08:00\"\n";
    QTest::newRow("no line_id") << head +
                                       "columns:\n  amount: 应结订单金额\n  currency: 货币种类\n"
                                       "  category: 交易状态\n"
                                << 5 << 3 << "columns: no 'line_id', which is required";
    QTest::newRow("no currency")
        << head + "columns:\n  line_id: 微信订单号\n  amount: 应结订单金额\n  category: 交易状态\n"
        << 5 << 3 << "no 'currency', and no fixed 'currency' key either";
    QTest::newRow("no columns") << head << 1 << 1 << "no 'columns' key";
    QTest::newRow("column not in the header")
        << head +
               "columns:\n  line_id: 微信订单号\n  amount: 订单总金额\n  currency: 货币种类\n"
               "  category: 交易状态\n"
        << 6 << 11 << "columns.amount: column '订单总金额' is not in ";
    QTest::newRow("unknown kind")
        << head +
               "columns:\n  line_id: 微信订单号\n  amount: 应结订单金额\n  currency: 货币种类\n"
               "  category: 交易状态\nkinds:\n  SUCCESS: PAYMENT\n"
        << 10 << 12
        << "kinds.SUCCESS: unknown kind 'PAYMENT' (known: DEBIT, CAPTURE, REFUND, "
           "CREDIT)";
    QTest::newRow("unknown key") << head + "delimeter: \";\"\n"
                                 << 4 << 1 << "unknown key 'delimeter'";
    QTest::newRow("unknown encoding") << QByteArray("encoding: KLINGON-8\n") << 1 << 11
                                      << "encoding: 'KLINGON-8' is not an encoding iconv knows";
    QTest::newRow("time without a zone")
        << QByteArray(
               "encoding: GBK\ncolumns:\n  line_id: 微信订单号\n  amount: 应结订单金额\n"
               "  currency: 货币种类\n  category: 交易状态\n  booked_at: 交易时间\n")
        << 7 << 14 << "'timezone' is required";
    QTest::newRow("not YAML") << head + "columns: [line_id\n" << 5 << 1 << "not valid YAML";
  }
  void mappingFaultsNameTheMappingFileAndLine() {
    QFETCH(QByteArray, yaml);
    QFETCH(int, line);
    QFETCH(int, column);
    QFETCH(QString, says);
    const QString mapping = temp("mapping.yaml");
    write(mapping, yaml);
    StatementOptions options;
    options.mappingFile = mapping.toStdString();
    const Outcome o = read(sample("wechat_bill.csv"), StatementFormat::MappedCsv, options);
    QVERIFY_STATEMENT_ERROR(o, mapping, line, column, says);
    QVERIFY(o.lines.empty());
  }

  void mappedCsvNeedsAMappingFile() {
    const QString path = sample("wechat_bill.csv");
    QVERIFY_STATEMENT_ERROR(read(path, StatementFormat::MappedCsv), path, 0, 0,
                            QStringLiteral("the csv format needs a mapping file"));
  }
};

QTEST_GUILESS_MAIN(TestStatementFormats)
#include "tst_statement_formats.moc"

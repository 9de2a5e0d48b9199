// ISO 4217 once: the codes, their minor-unit exponents, and amounts in major units turned into the
// ledger's minor units without floating point, every malformed one refused with a message that
// names what is wrong.
#include <QtTest>
#include <limits>

#include "idem/currencies.hpp"

using namespace idem;

class TestCurrencies : public QObject {
  Q_OBJECT

  static QString refusal(std::string_view amount, std::string_view currency) {
    try {
      const std::int64_t v = parseMinorUnits(amount, currency);
      return QStringLiteral("accepted as %1").arg(v);
    } catch (const std::invalid_argument& e) {
      return QString::fromUtf8(e.what());
    }
  }

 private slots:
  void exponentsFollowIso4217() {
    QCOMPARE(minorUnitExponent("JPY"), std::optional<int>(0));
    QCOMPARE(minorUnitExponent("CNY"), std::optional<int>(2));
    QCOMPARE(minorUnitExponent("USD"), std::optional<int>(2));
    QCOMPARE(minorUnitExponent("KWD"), std::optional<int>(3));
    QCOMPARE(minorUnitExponent("LYD"), std::optional<int>(3));
    QCOMPARE(minorUnitExponent("CLF"), std::optional<int>(4));
    QCOMPARE(minorUnitExponent("XAU"), std::optional<int>());  // listed, no minor unit
    QCOMPARE(minorUnitExponent("ABC"), std::optional<int>());
    QVERIFY(isIso4217("XAU"));
    QVERIFY(!isIso4217("ABC"));
    QVERIFY(!isIso4217("usd"));
  }

  void majorUnitsBecomeMinorUnits_data() {
    QTest::addColumn<QString>("amount");
    QTest::addColumn<QString>("currency");
    QTest::addColumn<qint64>("minor");
    QTest::newRow("CNY") << "29.90"
                         << "CNY" << qint64(2990);
    QTest::newRow("one decimal") << "29.9"
                                 << "CNY" << qint64(2990);
    QTest::newRow("whole") << "30"
                           << "USD" << qint64(3000);
    QTest::newRow("negative") << "-12.05"
                              << "EUR" << qint64(-1205);
    QTest::newRow("plus") << "+0.01"
                          << "EUR" << qint64(1);
    QTest::newRow("JPY") << "1500"
                         << "JPY" << qint64(1500);
    QTest::newRow("KWD") << "1.5"
                         << "KWD" << qint64(1500);
    QTest::newRow("CLF") << "0.0001"
                         << "CLF" << qint64(1);
    QTest::newRow("leading zeros") << "007.10"
                                   << "USD" << qint64(710);
    QTest::newRow("largest") << "92233720368547758.07"
                             << "USD" << qint64(std::numeric_limits<std::int64_t>::max());
    QTest::newRow("smallest") << "-92233720368547758.08"
                              << "USD" << qint64(std::numeric_limits<std::int64_t>::min());
  }
  void majorUnitsBecomeMinorUnits() {
    QFETCH(QString, amount);
    QFETCH(QString, currency);
    QFETCH(qint64, minor);
    QCOMPARE(parseMinorUnits(amount.toStdString(), currency.toStdString()), minor);
  }

  void malformedAmountsAreRefusedByName_data() {
    QTest::addColumn<QString>("amount");
    QTest::addColumn<QString>("currency");
    QTest::addColumn<QString>("says");
    QTest::newRow("empty") << ""
                           << "USD"
                           << "not a decimal number";
    QTest::newRow("letters") << "12a"
                             << "USD"
                             << "not a decimal number";
    QTest::newRow("comma") << "1,50"
                           << "EUR"
                           << "not a decimal number";
    QTest::newRow("two points") << "1.2.3"
                                << "USD"
                                << "not a decimal number";
    QTest::newRow("bare point") << "1."
                                << "USD"
                                << "not a decimal number";
    QTest::newRow("no whole") << ".5"
                              << "USD"
                              << "not a decimal number";
    QTest::newRow("sign alone") << "-"
                                << "USD"
                                << "not a decimal number";
    QTest::newRow("exponent") << "1e3"
                              << "USD"
                              << "not a decimal number";
    QTest::newRow("space") << " 1.00"
                           << "USD"
                           << "not a decimal number";
    QTest::newRow("JPY decimals") << "1500.0"
                                  << "JPY"
                                  << "more decimals than the currency's 0";
    QTest::newRow("USD three") << "1.005"
                               << "USD"
                               << "more decimals than the currency's 2";
    QTest::newRow("overflow") << "92233720368547758.08"
                              << "USD"
                              << "64-bit range";
    QTest::newRow("underflow") << "-92233720368547758.09"
                               << "USD"
                               << "64-bit range";
    QTest::newRow("huge") << "99999999999999999999999"
                          << "JPY"
                          << "64-bit range";
    QTest::newRow("unknown code") << "1.00"
                                  << "ABC"
                                  << "not an ISO 4217 currency code";
    QTest::newRow("gold") << "1"
                          << "XAU"
                          << "has no minor unit";
  }
  void malformedAmountsAreRefusedByName() {
    QFETCH(QString, amount);
    QFETCH(QString, currency);
    QFETCH(QString, says);
    const QString got = refusal(amount.toStdString(), currency.toStdString());
    QVERIFY2(got.contains(says) && got.contains(QStringLiteral("amount '%1'").arg(amount)),
             qPrintable(got));
  }
};

QTEST_GUILESS_MAIN(TestCurrencies)
#include "tst_currencies.moc"

// Cardinality: one careless client writing thousands of distinct biz types cannot take down the
// Prometheus that pages everyone. The biz_type label is bounded (--max-biz-types, first come first
// kept, --reconcile-biz-types always kept): with 5,000 distinct biz types the scrape keeps a
// bounded number of series, the overflow counter equals the rows counted under "other", the
// totals still equal SQL, and the log says once that the bound was hit.
#include <unistd.h>

#include <QTemporaryFile>
#include <QtTest>
#include <cstdio>
#include <set>

#include "collectors/currencies.hpp"
#include "exporter_harness.hpp"
#include "idem/currencies.hpp"
#include "metric_keys.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::test;

namespace {

constexpr int kBizTypes = 5000;
constexpr std::size_t kBound = 50;

// Biz types of the widest kind the v2 schema allows (64 characters), as first reproduced.
constexpr const char* kWideBizType = "'biz.' || lpad(i::text, 60, '0')";

std::string labelOf(const std::string& key) {
  const auto at = key.find("biz_type=\"");
  if (at == std::string::npos) return {};
  return key.substr(at + 10, key.find('"', at + 10) - at - 10);
}

double sumOf(const Series& s, const std::string& family, const std::string& label = {}) {
  double total = 0;
  for (const auto& [key, v] : s) {
    if (!key.starts_with(family + "{")) continue;
    if (!label.empty() && labelOf(key) != label) continue;
    total += v;
  }
  return total;
}

// The SQL array literal of the labels the exporter kept, for "rows of every other biz type".
std::string sqlArray(const std::set<std::string>& labels) {
  std::string out = "ARRAY[";
  bool first = true;
  for (const std::string& l : labels) {
    out += (first ? "'" : ",'") + l + "'";
    first = false;
  }
  return out + "]::text[]";
}

// Everything written to stderr (the exporter's log) while alive, readable at the end.
class StderrCapture {
 public:
  StderrCapture() {
    QVERIFY(file_.open());
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(file_.handle(), STDERR_FILENO);
  }
  ~StderrCapture() { restore(); }
  QByteArray text() {
    restore();
    file_.seek(0);
    return file_.readAll();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  QTemporaryFile file_;
  int saved_ = -1;
};

}  // namespace

class TestExporterCardinality : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

 private slots:
  void initTestCase() { db_ = std::make_unique<TestDatabase>("tst_exporter_cardinality"); }
  void init() { db_->reset(); }

  // The review's ledger: one business object with DEBITs in 300 currencies (ISO 4217 codes and
  // three letters that are none). The currency label keeps ISO codes only, the first
  // --max-currencies of them; the rest is summed under "other", and nothing owed is lost.
  void threeHundredCurrenciesStayWithinTheBound() {
    auto options = testOptions(db_->dsn());
    options.maxCurrencies = 5;
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));
    db_->exec(
        "SELECT idem.record_fund_flow('payment', 'o-many', 'DEBIT', 100, code, 'gw-' || code) "
        "FROM (SELECT chr(65 + i / 26 / 26 % 26) || chr(65 + i / 26 % 26) || chr(65 + i % 26) "
        "AS code FROM generate_series(0, 17575, 59) AS i) AS c");
    QCOMPARE(db_->scalar("SELECT count(DISTINCT currency) FROM idem.fund_flows"), 298LL);
    const double owed = double(
        db_->scalar("SELECT sum(owed_minor) FROM idem.overcharged_objects('{payment}', '1 day')"));
    QVERIFY(owed > 0);
    QVERIFY(waitUntil([&] {
      double total = 0;
      for (const auto& [key, v] : e.scrape()) {
        if (key.starts_with("idempotency_overcharged_amount_minor{")) total += v;
      }
      return total == owed;
    }));
    std::set<std::string> currencies;
    for (const auto& [key, v] : e.scrape()) {
      if (!key.starts_with("idempotency_overcharged_amount_minor{")) continue;
      const auto at = key.find("currency=\"");
      currencies.insert(key.substr(at + 10, key.find('"', at + 10) - at - 10));
    }
    QVERIFY2(currencies.size() <= 6, std::to_string(currencies.size()).c_str());
    QVERIFY(currencies.contains("other"));
    for (const std::string& c : currencies) {
      QVERIFY2(c == "other" || idem::isIso4217(c), c.c_str());
    }
  }

  void fiveThousandBizTypesStayWithinTheBound() {
    StderrCapture log;
    auto options = testOptions(db_->dsn());
    options.maxBizTypes = kBound;
    RunningExporter e(options);
    QVERIFY(e.waitForCollections(1));

    // 5,000 claims, each of its own biz type: the first kBound the collectors meet are kept.
    db_->exec("SELECT idem.begin('k-' || i, " + std::string(kWideBizType) +
              ", 'o-' || i, 'pay', NULL, 'initial', '{}'::jsonb) "
              "FROM generate_series(1, " +
              std::to_string(kBizTypes) + ") AS i");
    QVERIFY(e.waitForCollections(2));
    // Then a DEBIT for every tenth business object, some under a kept label, most under "other".
    db_->exec("SELECT idem.record_fund_flow(" + std::string(kWideBizType) +
              ", 'o-' || i, 'DEBIT', 100, 'CNY', 'gw-' || i) "
              "FROM generate_series(1, " +
              std::to_string(kBizTypes) + ", 10) AS i");
    QVERIFY(e.waitForCollections(2));

    const HttpAnswer a = httpGet({e.url(), {}, {}, std::chrono::milliseconds(10'000)});
    QCOMPARE(a.status, 200);
    const Series s = parseMetrics(a.body);

    // The labels: kBound admitted, the kept "payment", and "other".
    std::set<std::string> labels;
    std::map<std::string, int> seriesPerLabel;
    for (const auto& [key, v] : s) {
      const std::string label = labelOf(key);
      if (label.empty()) continue;
      labels.insert(label);
      ++seriesPerLabel[label];
    }
    QCOMPARE(labels.size(), kBound + 2);
    QVERIFY(labels.count("other") == 1);
    QVERIFY(labels.count("payment") == 1);
    for (const std::string& label : labels) {
      QVERIFY2(label == "other" || label == "payment" ||
                   (label.starts_with("biz.") && label.size() == 64),
               label.c_str());
    }
    // Every label carries the same series (a biz type exists in every family from its first
    // row), so the scrape is labels x that, whatever the data; the kept money-moving biz type has
    // the reconciliation's families besides.
    const int perLabel = seriesPerLabel["other"];
    for (const auto& [label, n] : seriesPerLabel) {
      if (label != "payment") QCOMPARE(n, perLabel);
    }
    QVERIFY(seriesPerLabel["payment"] >= perLabel);
    QVERIFY2(a.body.size() < 1'000'000, a.body.left(200).constData());

    // Nothing is lost: totals equal SQL, and "other" holds exactly the rows of the others.
    QCOMPARE(sumOf(s, "idempotency_requests_total"),
             double(db_->scalar("SELECT count(*) FROM idem.attempts")));
    QCOMPARE(sumOf(s, "idempotency_fund_flows_total"),
             double(db_->scalar("SELECT count(*) FROM idem.fund_flows")));
    const std::string kept = sqlArray(labels);
    const double otherAttempts = double(
        db_->scalar("SELECT count(*) FROM idem.attempts WHERE biz_type <> ALL(" + kept + ")"));
    const double otherFlows = double(
        db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE biz_type <> ALL(" + kept + ")"));
    QCOMPARE(otherAttempts, double(kBizTypes - static_cast<int>(kBound)));
    QCOMPARE(sumOf(s, "idempotency_requests_total", "other"), otherAttempts);
    QCOMPARE(sumOf(s, "idempotency_fund_flows_total", "other"), otherFlows);
    QCOMPARE(value(s, "idempotency_exporter_biz_types_overflow_total"),
             std::optional(otherAttempts + otherFlows));

    // The log says it once, naming the flag and the first biz type that did not fit.
    const QByteArray text = log.text();
    QCOMPARE(text.count("biz_type label bound reached"), 1);
    QVERIFY2(text.contains("--max-biz-types"), text.constData());
    QVERIFY2(text.contains("\"biz.0000"), text.constData());  // the biz type that did not fit
  }
};

QTEST_GUILESS_MAIN(TestExporterCardinality)
#include "tst_exporter_cardinality.moc"

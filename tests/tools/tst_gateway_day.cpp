// A simulated day as production knows it: the agents record a flow only when their downstream's
// answer reached them; the gateway calls back about a share of what it did (some callbacks twice,
// a round's in reverse order) and writes the day's statement of everything; importing it decides
// every lost response the gateway can answer, and none wrongly against what the gateway did. And
// the statement the simulated gateway writes reads back, in each format it writes, as it was made.
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>
#include <set>

#include "downstream.hpp"
#include "idem/statement_formats.hpp"
#include "simulator.hpp"
#include "statement_import.hpp"
#include "statement_writer.hpp"
#include "test_database.hpp"
#include "test_traffic.hpp"

using namespace idem;

class TestGatewayDay : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::atomic<bool> stop_{false};

  long long count(const std::string& sql) const { return db_->scalar(sql); }

  // The keys the gateway's truth says it charged (the stand-in's answers), from its JSON lines.
  static std::set<std::string> keysInTruth(const std::string& path) {
    std::set<std::string> keys;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const auto at = line.find("\"key\":\"");
      if (at == std::string::npos) continue;
      const auto from = at + 7;
      keys.insert(line.substr(from, line.find('"', from) - from));
    }
    return keys;
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_gateway_day"); }

  void theStatementDecidesEveryLostResponseItCanAndNoneWrongly() {
    QTemporaryDir dir;
    sim::SimulationConfig c = test::testTraffic(*db_, 11, "day", 1500);
    c.bizTypes = {"payment", "refund", "coupon"};
    c.responseLossRate = 0.1;
    c.callbackResolvesUnknownRate = 0;  // only the gateway's own word, no claimant's late answer
    c.gatewayReports = sim::GatewayReports::Callbacks;
    c.gatewayCallbackShare = 0.5;
    c.gatewayCallbackRepeatRate = 0.3;
    c.statementOut = dir.filePath("day.csv").toStdString();
    c.gatewayTruth = dir.filePath("truth.jsonl").toStdString();
    const sim::SimulationSummary s = sim::simulate(c, stop_, {});
    QVERIFY(s.responsesLost > 50);

    // Callbacks: each event once (re-deliveries changed nothing), each matched to the one flow of
    // its side effect: the claimant's own report when the answer reached it, else its own.
    const long long events = count("SELECT count(*) FROM idem.gateway_events");
    QVERIFY(events > 0);
    QCOMPARE(count("SELECT count(*) FROM idem.gateway_events WHERE result <> 'matched' OR flow_id "
                   "IS NULL"),
             0LL);
    QCOMPARE(count("SELECT count(DISTINCT flow_id) FROM idem.gateway_events"), events);
    QVERIFY(count("SELECT count(*) FROM idem.fund_flows WHERE recorded_by = 'ledger'") > 0);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"), 0LL);
    const long long unknownBefore = count(
        "SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN' AND biz_type <> 'coupon'");
    QVERIFY2(unknownBefore > 0, "some lost responses had no callback: the statement decides them");

    auto connection = db_->connect();
    ctl::StatementImportRequest request;
    request.path = c.statementOut;
    request.format = StatementFormat::StripeItemized;
    request.gateway = "sim-gateway";
    const ctl::StatementImportReport report = ctl::importStatement(*connection, request);
    QCOMPARE(report.unmatched + report.mismatched + report.duplicate, 0LL);
    QCOMPARE(report.resolvedSuccess, unknownBefore);
    // What is left UNKNOWN is what no gateway can answer: coupons leave no line.
    QCOMPARE(
        count(
            "SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN' AND biz_type <> 'coupon'"),
        0LL);
    // No wrong decision: every record the gateway's word decided SUCCESS, the gateway did.
    const std::set<std::string> charged = keysInTruth(c.gatewayTruth);
    pqxx::work tx(*connection);
    for (const pqxx::row& r :
         tx.exec("SELECT idempotency_key FROM idem.transitions WHERE actor_kind = 'reconciler' AND "
                 "to_status = 'SUCCESS'")) {
      QVERIFY2(charged.contains(r[0].c_str()), r[0].c_str());
    }
    // The same day sent again (a re-sent file) changes nothing.
    tx.commit();
    QVERIFY(ctl::importStatement(*connection, request).alreadyImported);
  }

  void theWrittenStatementReadsBackInEachFormat_data() {
    QTest::addColumn<int>("written");
    QTest::addColumn<int>("lines");
    QTest::newRow("stripe") << static_cast<int>(StatementFormat::StripeItemized) << 3;
    QTest::newRow("adyen") << static_cast<int>(StatementFormat::AdyenSettlement) << 3;
    QTest::newRow("camt.053") << static_cast<int>(StatementFormat::Camt053) << 3;
  }
  void theWrittenStatementReadsBackInEachFormat() {
    QFETCH(int, written);
    QFETCH(int, lines);
    const auto f = static_cast<StatementFormat>(written);
    const std::vector<sim::SideEffect> movements{
        {"k-pay", "payment", "o-1", FundFlowKind::Debit, 2990, "gw-o-1-1", false, 1764583200000},
        {"k-ref", "refund", "o-2", FundFlowKind::Refund, 5, "gw-o-2-1", false, 1764583201000},
        {"k-out", "payout", "o-3", FundFlowKind::Credit, 100000, "gw-o-3-1", false, 1764583202000},
        {"k-cpn", "coupon", "o-4", std::nullopt, 0, "cp-o-4-1", false, 1764583203000},
        {"k-pay2", "payment", "o-5", FundFlowKind::Debit, 7, "gw-o-5-1", false, 1764583204000},
    };
    QTemporaryDir dir;
    const std::string path = dir.filePath("statement").toStdString();
    sim::writeStatementFile(path, f, movements);
    std::vector<StatementLine> read;
    readStatement(path, f, {}, [&](StatementLine&& l) { read.push_back(std::move(l)); });
    QCOMPARE(static_cast<int>(read.size()), lines);
    for (const StatementLine& l : read) {
      const auto m = std::find_if(movements.begin(), movements.end(),
                                  [&](const sim::SideEffect& e) { return e.ref == l.gatewayRef; });
      QVERIFY2(m != movements.end(), l.gatewayRef.c_str());
      QCOMPARE(l.amountMinor, m->amountMinor);
      QCOMPARE(l.currency, std::string("CNY"));
      QCOMPARE(*l.flowKind, std::string(format(*m->kind)));
      // The key where each gateway keeps it; Adyen's refund names it as the modification's.
      QCOMPARE(l.idempotencyKey, m->key);
    }
  }
};

QTEST_GUILESS_MAIN(TestGatewayDay)
#include "tst_gateway_day.moc"

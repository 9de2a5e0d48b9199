// The money questions of sql/012_money_questions.sql against hand-built data: money moved without
// SUCCESS (grace, window, tombstone, FREEZE alone, CAPTURE), SUCCESS without money moved, the
// overcharges (CREDIT is not a refund, two currencies, a refund that covers the excess removes the
// row, a partial one leaves the rest owed), the two stories' order and argument errors, who may
// read them, and duplicate charges and refunds recorded concurrently while the questions are read.
#include <QtTest>
#include <atomic>
#include <optional>
#include <thread>

#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

constexpr const char* kMoneyMoved =
    "SELECT biz_id, first_charge_ref, charges, charged_minor, currency, record_key, "
    "record_status, record_version FROM idem.money_moved_without_success('{payment}', $1, $2) "
    "ORDER BY biz_id";
constexpr const char* kSuccessWithout =
    "SELECT biz_id, idempotency_key, version, agent_id FROM "
    "idem.success_without_money_moved('{payment}', $1, $2) ORDER BY biz_id";
constexpr const char* kOvercharged =
    "SELECT biz_id, currency, charges, charged_minor, refunded_minor, owed_minor, "
    "array_to_string(idempotency_keys, ','), array_to_string(agent_ids, ','), "
    "cardinality(flow_ids) FROM idem.overcharged_objects('{payment}', $1) ORDER BY biz_id, "
    "currency";

}  // namespace

class TestMoneyQuestions : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;

  Claim claim(const std::string& key, const std::string& bizId,
              std::optional<std::string> agent = std::nullopt,
              std::optional<std::string> trace = std::nullopt,
              TriggerSource source = TriggerSource::Initial) {
    BeginRequest r = test::payRequest(key, bizId);
    r.agentId = std::move(agent);
    r.traceId = std::move(trace);
    r.source = source;
    const BeginResult begun = ProtocolClient(*conn_).begin(r);
    return {key, begun.version.value_or(0), begun.claimToken.value_or("")};
  }
  void succeed(const std::string& key, const std::string& bizId,
               std::optional<std::string> agent = std::nullopt) {
    const Claim c = claim(key, bizId, std::move(agent));
    QVERIFY(ProtocolClient(*conn_).complete(key, c.version, "{}", c.token).ok());
  }
  void unknown(const std::string& key, const std::string& bizId) {
    const Claim c = claim(key, bizId);
    QVERIFY(ProtocolClient(*conn_).markUnknown(key, c.version, "gateway timeout", c.token).ok());
  }
  std::int64_t flow(const std::string& bizId, FundFlowKind kind, std::int64_t amount,
                    const std::string& currency, const std::string& ref,
                    std::optional<std::string> key = std::nullopt) {
    return ProtocolClient(*conn_)
        .recordFundFlow({"payment", bizId, kind, amount, currency, ref, std::move(key)})
        .flowId;
  }
  // Moves a business object's flows (and its records' updated_at) back in time: the ledger is
  // append-only, so as the superuser with the triggers off.
  void age(const std::string& bizId, const std::string& by) {
    db_->exec(
        "SET session_replication_role = replica; UPDATE idem.fund_flows SET created_at = "
        "created_at - interval '" +
        by + "' WHERE biz_id = '" + bizId +
        "'; UPDATE idem.records SET updated_at = updated_at - interval '" + by +
        "' WHERE biz_id = '" + bizId + "'");
  }
  pqxx::result rows(const char* sql, const std::string& window = "1 day",
                    const std::optional<std::string>& grace = std::string("0")) {
    pqxx::nontransaction tx(*conn_);
    if (grace) return tx.exec_params(sql, window, *grace);
    return tx.exec_params(sql, window);
  }
  std::vector<std::string> column(const pqxx::result& r, int c = 0) {
    std::vector<std::string> out;
    for (const auto& row : r) out.emplace_back(row[c].is_null() ? "NULL" : row[c].c_str());
    return out;
  }
  using Ids = std::vector<std::string>;
  // Each row of a story as its non-NULL columns joined by ':'.
  Ids story(const std::string& sql) {
    pqxx::nontransaction tx(*conn_);
    Ids out;
    for (const auto& row : tx.exec(sql)) {
      std::string line;
      for (const auto& field : row) {
        if (field.is_null()) continue;
        if (!line.empty()) line += ':';
        line += field.c_str();
      }
      out.push_back(line);
    }
    return out;
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_money_questions"); }
  // A fresh database for each case (conn_ goes before db_ at the end, being declared after it).
  void init() {
    conn_.reset();
    db_->reset();
    conn_ = db_->connect();
  }

  void moneyMovedWithoutSuccessNamesTheFirstChargeAndTheLatestRecord() {
    unknown("k-1", "o-1");
    flow("o-1", FundFlowKind::Debit, 2990, "CNY", "gw-1", "k-1");
    flow("o-1", FundFlowKind::Debit, 2990, "CNY", "gw-2", "k-1");
    flow("o-1", FundFlowKind::Debit, 10, "USD", "gw-3", "k-1");
    succeed("k-2", "o-2");
    flow("o-2", FundFlowKind::Debit, 100, "CNY", "gw-4", "k-2");
    flow("o-3", FundFlowKind::Debit, 100, "CNY", "gw-5");  // no record at all
    const pqxx::result r = rows(kMoneyMoved);
    QCOMPARE(column(r), (Ids{"o-1", "o-3"}));
    QCOMPARE(std::string(r[0][1].c_str()), std::string("gw-1"));
    QCOMPARE(r[0][2].as<long long>(), 3LL);
    QCOMPARE(r[0][3].as<long long>(), 5980LL);  // in the first charge's currency
    QCOMPARE(std::string(r[0][4].c_str()), std::string("CNY"));
    QCOMPARE(std::string(r[0][5].c_str()), std::string("k-1"));
    QCOMPARE(std::string(r[0][6].c_str()), std::string("UNKNOWN"));
    QCOMPARE(r[0][7].as<int>(), 2);
    QVERIFY(r[1][5].is_null());
    QVERIFY(r[1][6].is_null());
  }

  void moneyMovedWithoutSuccessKeepsToTheWindowAndTheGrace() {
    flow("o-young", FundFlowKind::Debit, 100, "CNY", "gw-1");
    flow("o-old", FundFlowKind::Debit, 100, "CNY", "gw-2");
    age("o-old", "2 hours");
    flow("o-gone", FundFlowKind::Debit, 100, "CNY", "gw-3");
    age("o-gone", "3 days");
    QCOMPARE(column(rows(kMoneyMoved, "1 day", "1 hour")), (Ids{"o-old"}));
    QCOMPARE(column(rows(kMoneyMoved, "1 day", "0")), (Ids{"o-old", "o-young"}));
    QCOMPARE(column(rows(kMoneyMoved, "4 days", "0")), (Ids{"o-gone", "o-old", "o-young"}));
    // Just inside and just outside either end of the window.
    QCOMPARE(column(rows(kMoneyMoved, "2 hours 1 minute", "1 hour 59 minutes")), (Ids{"o-old"}));
    QCOMPARE(column(rows(kMoneyMoved, "2 hours 1 minute", "2 hours 10 seconds")), (Ids{}));
    QCOMPARE(column(rows(kMoneyMoved, "1 hour 59 minutes", "0")), (Ids{"o-young"}));
  }

  void moneyMovedIsADebitOrACaptureNotAHoldAlone() {
    unknown("k-hold", "o-hold");
    flow("o-hold", FundFlowKind::Freeze, 500, "CNY", "gw-1", "k-hold");
    unknown("k-unfrozen", "o-unfrozen");
    flow("o-unfrozen", FundFlowKind::Freeze, 500, "CNY", "gw-2", "k-unfrozen");
    flow("o-unfrozen", FundFlowKind::Unfreeze, 500, "CNY", "gw-3", "k-unfrozen");
    unknown("k-credit", "o-credit");
    flow("o-credit", FundFlowKind::Credit, 500, "CNY", "gw-4", "k-credit");
    unknown("k-captured", "o-captured");
    flow("o-captured", FundFlowKind::Freeze, 500, "CNY", "gw-5", "k-captured");
    flow("o-captured", FundFlowKind::Capture, 500, "CNY", "gw-6", "k-captured");
    QCOMPARE(column(rows(kMoneyMoved)), (Ids{"o-captured"}));
  }

  void aTombstoneOfAPurgedSuccessStillCountsAsSuccess() {
    succeed("k-paid", "o-paid");
    flow("o-paid", FundFlowKind::Debit, 900, "CNY", "gw-1", "k-paid");
    QCOMPARE(column(rows(kMoneyMoved)), (Ids{}));
    QTest::qWait(5);
    db_->exec("SELECT * FROM idem.purge('1 microsecond')");
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE biz_id = 'o-paid'"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.retired_keys WHERE biz_id = 'o-paid'"), 1LL);
    QCOMPARE(column(rows(kMoneyMoved)), (Ids{}));
  }

  void successWithoutMoneyMovedIgnoresHoldsAndCredits() {
    succeed("k-none", "o-none", "agent-7");
    succeed("k-hold", "o-hold");
    flow("o-hold", FundFlowKind::Freeze, 500, "CNY", "gw-1", "k-hold");
    succeed("k-credit", "o-credit");
    flow("o-credit", FundFlowKind::Credit, 500, "CNY", "gw-2", "k-credit");
    succeed("k-captured", "o-captured");
    flow("o-captured", FundFlowKind::Capture, 500, "CNY", "gw-3", "k-captured");
    succeed("k-debited", "o-debited");
    flow("o-debited", FundFlowKind::Debit, 500, "CNY", "gw-4", "k-debited");
    const pqxx::result r = rows(kSuccessWithout);
    QCOMPARE(column(r), (Ids{"o-credit", "o-hold", "o-none"}));
    QCOMPARE(column(r, 1), (Ids{"k-credit", "k-hold", "k-none"}));
    QCOMPARE(column(r, 3), (Ids{"NULL", "NULL", "agent-7"}));
    QCOMPARE(r[2][2].as<int>(), 2);
  }

  void successWithoutMoneyMovedKeepsToTheWindowAndTheGrace() {
    succeed("k-young", "o-young");
    succeed("k-old", "o-old");
    age("o-old", "2 hours");
    succeed("k-gone", "o-gone");
    age("o-gone", "3 days");
    QCOMPARE(column(rows(kSuccessWithout, "1 day", "1 hour")), (Ids{"o-old"}));
    QCOMPARE(column(rows(kSuccessWithout, "4 days", "0")), (Ids{"o-gone", "o-old", "o-young"}));
  }

  void overchargedObjectsOweWhatExceedsTheFirstChargePlusRefunds() {
    claim("k-a", "o-twice", std::string("agent-a"));
    claim("k-b", "o-twice", std::string("agent-b"));  // refused, o-twice is claimed: an attempt
    flow("o-twice", FundFlowKind::Debit, 1000, "CNY", "gw-1", "k-a");
    flow("o-twice", FundFlowKind::Debit, 1000, "CNY", "gw-2", "k-b");
    flow("o-once", FundFlowKind::Debit, 1000, "CNY", "gw-3");
    flow("o-held", FundFlowKind::Freeze, 500, "CNY", "gw-4");
    flow("o-held", FundFlowKind::Capture, 500, "CNY", "gw-5");
    const pqxx::result r = rows(kOvercharged, "1 day", std::nullopt);
    QCOMPARE(column(r), (Ids{"o-twice"}));
    QCOMPARE(std::string(r[0][1].c_str()), std::string("CNY"));
    QCOMPARE(r[0][2].as<long long>(), 2LL);
    QCOMPARE(r[0][3].as<long long>(), 2000LL);
    QCOMPARE(r[0][4].as<long long>(), 0LL);
    QCOMPARE(r[0][5].as<long long>(), 1000LL);
    QCOMPARE(std::string(r[0][6].c_str()), std::string("k-a,k-b"));
    QCOMPARE(std::string(r[0][7].c_str()), std::string("agent-a,agent-b"));
    QCOMPARE(r[0][8].as<int>(), 2);
  }

  void aCreditIsNotARefund() {
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-1");
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-2");
    flow("o-1", FundFlowKind::Credit, 1000, "CNY", "gw-3");
    const pqxx::result r = rows(kOvercharged, "1 day", std::nullopt);
    QCOMPARE(column(r), (Ids{"o-1"}));
    QCOMPARE(r[0][5].as<long long>(), 1000LL);
  }

  void aRefundThatCoversTheExcessRemovesTheRowAPartialOneLeavesTheRest() {
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-1");
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-2");
    flow("o-1", FundFlowKind::Refund, 400, "CNY", "gw-3");
    pqxx::result r = rows(kOvercharged, "1 day", std::nullopt);
    QCOMPARE(column(r), (Ids{"o-1"}));
    QCOMPARE(r[0][4].as<long long>(), 400LL);
    QCOMPARE(r[0][5].as<long long>(), 600LL);
    flow("o-1", FundFlowKind::Refund, 600, "CNY", "gw-4");
    QCOMPARE(column(rows(kOvercharged, "1 day", std::nullopt)), (Ids{}));
  }

  void amountsCompareWithinOneCurrency() {
    flow("o-mixed", FundFlowKind::Debit, 300, "EUR", "gw-1");  // the first charge
    flow("o-mixed", FundFlowKind::Capture, 300, "EUR", "gw-2");
    flow("o-mixed", FundFlowKind::Debit, 100, "USD", "gw-3");
    flow("o-mixed", FundFlowKind::Refund, 100, "CNY", "gw-4");  // offsets nothing in USD
    pqxx::result r = rows(kOvercharged, "1 day", std::nullopt);
    QCOMPARE(column(r, 1), (Ids{"EUR", "USD"}));
    QCOMPARE(r[0][5].as<long long>(), 300LL);
    QCOMPARE(r[1][5].as<long long>(), 100LL);
    flow("o-mixed", FundFlowKind::Refund, 100, "USD", "gw-5");
    QCOMPARE(column(rows(kOvercharged, "1 day", std::nullopt), 1), (Ids{"EUR"}));
  }

  void overchargesWeighAChargeInTheWindowAgainstFlowsBeforeIt() {
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-1");
    age("o-1", "3 days");
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-2");  // inside the window, a duplicate
    flow("o-old", FundFlowKind::Debit, 1000, "CNY", "gw-3");
    flow("o-old", FundFlowKind::Debit, 1000, "CNY", "gw-4");
    age("o-old", "3 days");  // charged only before the window
    QCOMPARE(column(rows(kOvercharged, "1 day", std::nullopt)), (Ids{"o-1"}));
    QCOMPARE(column(rows(kOvercharged, "4 days", std::nullopt)), (Ids{"o-1", "o-old"}));
  }

  void traceStoryTellsEveryAttemptOfTheTraceInTimeOrder() {
    const Claim first = claim("k-1", "o-1", std::string("agent-1"), std::string("trace-1"));
    QVERIFY(ProtocolClient(*conn_).markUnknown("k-1", first.version, "timeout", first.token).ok());
    flow("o-1", FundFlowKind::Debit, 100, "CNY", "gw-1", "k-1");
    claim("k-2", "o-1", std::string("agent-1"), std::string("trace-1"), TriggerSource::Llm);
    claim("k-other", "o-2", std::string("agent-2"), std::string("trace-2"));
    QCOMPARE(story("SELECT event, idempotency_key, coalesce(trigger_source, to_status, "
                   "flow_kind) FROM idem.trace_story('trace-1', NULL)"),
             (Ids{"attempt:k-1:initial", "transition:k-1:PROCESSING", "transition:k-1:UNKNOWN",
                  "fund_flow:k-1:DEBIT", "attempt:k-2:llm"}));
    // A limit keeps the latest events, in time order.
    QCOMPARE(story("SELECT event, idempotency_key FROM idem.trace_story(NULL, 'agent-1', 2)"),
             (Ids{"fund_flow:k-1", "attempt:k-2"}));
    pqxx::nontransaction tx(*conn_);
    QCOMPARE(tx.exec1("SELECT count(*) FROM idem.trace_story(NULL, 'agent-1')")[0].as<int>(), 5);
    QCOMPARE(tx.exec1("SELECT count(*) FROM idem.trace_story('nobody', NULL)")[0].as<int>(), 0);
  }

  void traceStoryRefusesAmbiguousArguments() {
    auto error = [&](const std::string& call) -> std::string {
      try {
        pqxx::nontransaction tx(*conn_);
        tx.exec("SELECT * FROM " + call);
      } catch (const pqxx::sql_error& e) {
        return e.what();
      }
      return {};
    };
    QVERIFY(error("idem.trace_story(NULL, NULL)").find("both are NULL") != std::string::npos);
    QVERIFY(error("idem.trace_story('t', 'a')").find("not both") != std::string::npos);
    QVERIFY(error("idem.trace_story('t', NULL, 0)").find("p_limit") != std::string::npos);
    QVERIFY(error("idem.business_object_story('payment', NULL)").find("p_biz_id") !=
            std::string::npos);
    QVERIFY(error("idem.business_object_story('payment', 'o', -1)").find("p_limit") !=
            std::string::npos);
  }

  void businessObjectStoryHasEveryKeyAndFlowsNoKeyRecorded() {
    const Claim first = claim("k-1", "o-1", std::nullopt, std::string("trace-1"));
    QVERIFY(ProtocolClient(*conn_).markUnknown("k-1", first.version, "timeout", first.token).ok());
    // Refused under a new key (k-1 is UNKNOWN): no record, an attempt of the same trace.
    claim("k-2", "o-1", std::nullopt, std::string("trace-1"), TriggerSource::Llm);
    claim("k-elsewhere", "o-3", std::nullopt, std::string("trace-1"));
    flow("o-1", FundFlowKind::Debit, 100, "CNY", "gw-1");         // no key
    flow("o-1", FundFlowKind::Debit, 100, "CNY", "gw-2", "k-3");  // a key with no record
    claim("k-other", "o-2");
    QCOMPARE(story("SELECT event, coalesce(idempotency_key, '-'), external_ref FROM "
                   "idem.business_object_story('payment', 'o-1')"),
             (Ids{"attempt:k-1", "transition:k-1", "transition:k-1", "attempt:k-2",
                  "fund_flow:-:gw-1", "fund_flow:k-3:gw-2"}));
  }

  // Forty business objects claimed; then, at once, two sessions charge each of them (one charge a
  // duplicate), a third refunds the even ones once both charges are in, a fourth completes every
  // fourth record, while a fifth keeps reading the questions. Every read is a consistent state (an
  // overcharged row owes exactly one charge), and once the writers are done the counts are exact.
  void concurrentChargesAndRefundsSettleExactly() {
    constexpr int kObjects = 40;
    std::vector<Claim> claims;
    for (int i = 0; i < kObjects; ++i) {
      claims.push_back(claim("k-" + std::to_string(i), "o-" + std::to_string(i)));
    }
    std::atomic<bool> writing{true};
    std::atomic<int> reads{0}, inconsistent{0};
    std::thread reader([&] {
      auto c = db_->connect();
      while (writing) {
        pqxx::nontransaction tx(*c);
        inconsistent += tx.exec1(
                              "SELECT count(*) FROM idem.overcharged_objects('{payment}', "
                              "'1 day') WHERE owed_minor <> 100 OR charges <> 2")[0]
                            .as<int>();
        const int moved = tx.exec1(
                                "SELECT count(*) FROM idem.money_moved_without_success("
                                "'{payment}', '1 day', '0')")[0]
                              .as<int>();
        if (moved < 0 || moved > kObjects) ++inconsistent;
        ++reads;
      }
    });
    auto charger = [&](const std::string& ref) {
      auto c = db_->connect();
      ProtocolClient client(*c);
      for (int i = 0; i < kObjects; ++i) {
        const std::string n = std::to_string(i);
        client.recordFundFlow(
            {"payment", "o-" + n, FundFlowKind::Debit, 100, "CNY", ref + n, "k-" + n});
      }
    };
    std::thread first(charger, "gw-a-"), second(charger, "gw-b-");
    std::thread refunder([&] {
      auto c = db_->connect();
      ProtocolClient client(*c);
      for (int i = 0; i < kObjects; i += 2) {
        const std::string n = std::to_string(i);
        while (db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'o-" + n +
                           "' AND kind = 'DEBIT'") < 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        client.recordFundFlow(
            {"payment", "o-" + n, FundFlowKind::Refund, 100, "CNY", "gw-r-" + n, "k-" + n});
      }
    });
    std::thread claimant([&] {
      auto c = db_->connect();
      ProtocolClient client(*c);
      for (int i = 0; i < kObjects; i += 4) {
        client.complete(claims[i].key, claims[i].version, "{}", claims[i].token);
      }
    });
    for (std::thread* t : {&first, &second, &refunder, &claimant}) t->join();
    writing = false;
    reader.join();
    QVERIFY(reads > 0);
    QCOMPARE(inconsistent.load(), 0);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL"),
             (long long)kObjects);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.overcharged_objects('{payment}', '1 day')"),
             (long long)kObjects / 2);
    QCOMPARE(db_->scalar("SELECT sum(owed_minor) FROM idem.overcharged_objects('{payment}', "
                         "'1 day')"),
             100LL * kObjects / 2);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.money_moved_without_success('{payment}', "
                         "'1 day', '0')"),
             (long long)(kObjects - kObjects / 4));
  }

  void theReaderAndTheOperatorMayAskWriterMayNot() {
    for (const char* group : {"idem_reader", "idem_operator"}) {
      const std::string role = db_->createLoginRole(std::string("money_") + group, group);
      pqxx::connection c(db_->dsnAs(role));
      pqxx::nontransaction tx(c);
      tx.exec("SELECT count(*) FROM idem.money_moved_without_success('{payment}', '1 day', '0')");
      tx.exec("SELECT count(*) FROM idem.success_without_money_moved('{payment}', '1 day', '0')");
      tx.exec("SELECT count(*) FROM idem.overcharged_objects('{payment}', '1 day')");
      tx.exec("SELECT count(*) FROM idem.trace_story('t', NULL)");
      tx.exec("SELECT count(*) FROM idem.business_object_story('payment', 'o')");
    }
    const std::string writer = db_->createLoginRole("money_writer", "idem_writer");
    pqxx::connection c(db_->dsnAs(writer));
    pqxx::nontransaction tx(c);
    QVERIFY_THROWS_EXCEPTION(pqxx::insufficient_privilege,
                             tx.exec("SELECT * FROM idem.trace_story('t', NULL)"));
  }
};

QTEST_GUILESS_MAIN(TestMoneyQuestions)
#include "tst_money_questions.moc"

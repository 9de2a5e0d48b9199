// The money questions of sql/migrations/012_money_questions.sql against hand-built data: money
// moved without SUCCESS (grace, window, tombstone, FREEZE alone, CAPTURE), SUCCESS without money
// moved, the overcharges (CREDIT is not a refund, two currencies, a refund that covers the excess
// removes the row, a partial one leaves the rest owed), the two stories' order and argument errors,
// who may read them, and duplicate charges and refunds recorded concurrently while the questions
// are read. Since sql/migrations/013_charged_objects.sql: the charge counts the database keeps
// (exact under concurrent flows, rebuilt after a load with triggers off), and each question equal
// to its plain whole-ledger definition on a ledger full of the cases its shortcuts set aside.
#include <QtTest>
#include <atomic>
#include <optional>
#include <thread>

#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

// The three questions written plainly over the whole ledger (docs/contract/metrics.md), the
// yardstick for the schema's window-walking ones: a row a business object (and currency).
constexpr const char* kPlainMoneyMoved =
    "SELECT f.biz_id FROM idem.fund_flows f WHERE f.kind IN ('DEBIT', 'CAPTURE') "
    "AND f.created_at >= now() - $1::interval AND f.created_at < now() - $2::interval "
    "AND NOT EXISTS (SELECT FROM idem.records r WHERE r.biz_type = f.biz_type "
    "AND r.biz_id = f.biz_id AND r.status = 'SUCCESS') "
    "AND NOT EXISTS (SELECT FROM idem.retired_keys t WHERE t.biz_type = f.biz_type "
    "AND t.biz_id = f.biz_id AND t.status = 'SUCCESS') GROUP BY f.biz_id ORDER BY f.biz_id";
constexpr const char* kPlainSuccessWithout =
    "SELECT r.biz_id FROM idem.records r WHERE r.status = 'SUCCESS' "
    "AND r.updated_at >= now() - $1::interval AND r.updated_at < now() - $2::interval "
    "AND r.biz_id NOT IN (SELECT f.biz_id FROM idem.fund_flows f "
    "WHERE f.kind IN ('DEBIT', 'CAPTURE')) ORDER BY r.biz_id";
constexpr const char* kPlainOvercharged =
    "WITH first AS (SELECT DISTINCT ON (biz_id) biz_id, id, currency FROM idem.fund_flows "
    "WHERE kind IN ('DEBIT', 'CAPTURE') ORDER BY biz_id, id), "
    "owed AS (SELECT f.biz_id, f.currency::text AS currency, "
    "sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE') AND f.id <> first.id) AS "
    "beyond, "
    "sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND') AS refunded "
    "FROM idem.fund_flows f JOIN first USING (biz_id) GROUP BY f.biz_id, f.currency) "
    "SELECT biz_id || ':' || currency || ':' || (coalesce(beyond, 0) - coalesce(refunded, 0)) "
    "FROM owed WHERE coalesce(beyond, 0) - coalesce(refunded, 0) > 0 AND biz_id IN "
    "(SELECT biz_id FROM idem.fund_flows WHERE kind IN ('DEBIT', 'CAPTURE') "
    "AND created_at >= now() - $1::interval) ORDER BY 1";
constexpr const char* kOwedRows =
    "SELECT biz_id || ':' || currency || ':' || owed_minor FROM "
    "idem.overcharged_objects('{payment}', $1) ORDER BY 1";
// A row a business object whose kept charge count differs from its ledger's.
constexpr const char* kChargeCountsOff =
    "SELECT count(*) FROM idem.charged_objects c FULL JOIN (SELECT biz_type, biz_id, count(*) AS "
    "n, "
    "max(created_at) AS latest FROM idem.fund_flows WHERE kind IN ('DEBIT', 'CAPTURE') "
    "GROUP BY biz_type, biz_id) f ON f.biz_type = c.biz_type AND f.biz_id = c.biz_id "
    "WHERE c.charges IS DISTINCT FROM f.n OR c.last_charge_at IS DISTINCT FROM f.latest";

constexpr const char* kMoneyMovedWithoutSuccess =
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
    const pqxx::result r = rows(kMoneyMovedWithoutSuccess);
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
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "1 day", "1 hour")), (Ids{"o-old"}));
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "1 day", "0")), (Ids{"o-old", "o-young"}));
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "4 days", "0")),
             (Ids{"o-gone", "o-old", "o-young"}));
    // Just inside and just outside either end of the window.
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "2 hours 1 minute", "1 hour 59 minutes")),
             (Ids{"o-old"}));
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "2 hours 1 minute", "2 hours 10 seconds")),
             (Ids{}));
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, "1 hour 59 minutes", "0")), (Ids{"o-young"}));
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
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess)), (Ids{"o-captured"}));
  }

  void aTombstoneOfAPurgedSuccessStillCountsAsSuccess() {
    succeed("k-paid", "o-paid");
    flow("o-paid", FundFlowKind::Debit, 900, "CNY", "gw-1", "k-paid");
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess)), (Ids{}));
    QTest::qWait(5);
    db_->exec("SELECT * FROM idem.purge('1 microsecond')");
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE biz_id = 'o-paid'"), 0LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.retired_keys WHERE biz_id = 'o-paid'"), 1LL);
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess)), (Ids{}));
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

  // A ledger older than the amount bound may hold amounts no sum of bigints survives (two DEBITs
  // of 2^63-1 made the questions fail with "bigint out of range", freezing the exporter's money
  // gauges). The questions sum in numeric and answer; a total beyond bigint reads as its bound.
  void theMoneyQuestionsAnswerUnderTheLargestLegacyAmounts() {
    db_->exec(
        "ALTER TABLE idem.fund_flows DROP CONSTRAINT fund_flows_amount_bounded; "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, recorded_by) VALUES ('payment', 'o-huge', 'DEBIT', 9223372036854775807, "
        "'CNY', 'gw-h1', 'legacy'); "
        "INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref, duplicate_of, recorded_by) SELECT 'payment', 'o-huge', 'DEBIT', "
        "9223372036854775807, 'CNY', 'gw-h2', id, 'legacy' FROM idem.fund_flows WHERE "
        "external_ref = 'gw-h1'; "
        "ALTER TABLE idem.fund_flows ADD CONSTRAINT fund_flows_amount_bounded "
        "CHECK (amount_minor <= 999999999999999) NOT VALID");
    flow("o-small", FundFlowKind::Debit, 100, "CNY", "gw-s1");
    flow("o-small", FundFlowKind::Debit, 100, "CNY", "gw-s2");
    const pqxx::result owed = rows(kOvercharged, "1 day", std::nullopt);
    QCOMPARE(column(owed), (Ids{"o-huge", "o-small"}));
    QCOMPARE(column(owed, 3), (Ids{"9223372036854775807", "200"}));  // charged, at its bound
    QCOMPARE(column(owed, 5), (Ids{"9223372036854775807", "100"}));  // owed
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess)), (Ids{"o-huge", "o-small"}));
    QCOMPARE(column(rows(kMoneyMovedWithoutSuccess), 3), (Ids{"9223372036854775807", "200"}));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.money_position WHERE money_moved"), 2LL);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.side_effect_position WHERE "
                         "side_effect_recorded"),
             2LL);
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

  void concurrentFlowsOfOneObjectAreEachCountedOnce() {
    constexpr int kThreads = 6, kObjects = 5, kRounds = 20;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto c = db_->connect();
        ProtocolClient client(*c);
        for (int round = 0; round < kRounds; ++round) {
          for (int i = 0; i < kObjects; ++i) {
            const int o = (i + t) % kObjects;  // every thread on every object, in turn
            const FundFlowKind kind = (round + t) % 3 == 0   ? FundFlowKind::Capture
                                      : (round + t) % 3 == 1 ? FundFlowKind::Debit
                                                             : FundFlowKind::Refund;
            client.recordFundFlow(
                {"payment", "o-" + std::to_string(o), kind, 10, "CNY",
                 "gw-" + std::to_string(t) + "-" + std::to_string(round) + "-" + std::to_string(o),
                 std::nullopt});
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    QCOMPARE(db_->scalar(kChargeCountsOff), 0LL);
    QCOMPARE(db_->scalar("SELECT sum(charges) FROM idem.charged_objects"),
             db_->scalar("SELECT count(*) FROM idem.fund_flows WHERE kind <> 'REFUND'"));
    QCOMPARE(column(rows(kOwedRows, "1 day", std::nullopt)),
             column(rows(kPlainOvercharged, "1 day", std::nullopt)));
  }

  void aLedgerLoadedWithTriggersOffIsCountedByTheRecount() {
    flow("o-1", FundFlowKind::Debit, 1000, "CNY", "gw-1");
    db_->exec(
        "SET session_replication_role = replica; INSERT INTO idem.fund_flows (biz_type, biz_id, "
        "kind, amount_minor, currency, external_ref, duplicate_of, recorded_by) VALUES "
        "('payment', 'o-1', 'DEBIT', 1000, 'CNY', 'gw-2', (SELECT id FROM idem.fund_flows WHERE "
        "external_ref = 'gw-1'), 'ledger'), ('payment', 'o-2', 'CAPTURE', 5, 'CNY', 'gw-3', NULL, "
        "'ledger')");
    QCOMPARE(db_->scalar(kChargeCountsOff), 2LL);  // o-1 counted once, o-2 not at all
    QCOMPARE(column(rows(kOvercharged, "1 day", std::nullopt)), (Ids{}));
    QCOMPARE(db_->scalar("SELECT idem.recount_charged_objects()"), 2LL);
    QCOMPARE(db_->scalar(kChargeCountsOff), 0LL);
    QCOMPARE(column(rows(kOvercharged, "1 day", std::nullopt)), (Ids{"o-1"}));
  }

  // The cases each question's shortcut sets aside or lets through: SUCCESS records updated long
  // before their object's charge and charges recorded long before their SUCCESS, repeated charges
  // across kinds, currencies and the window's edge, refunds that cover the excess or part of it.
  void eachQuestionEqualsItsWholeLedgerDefinition() {
    for (int i = 0; i < 60; ++i) {
      const std::string n = std::to_string(i), o = "o-" + n, k = "k-" + n;
      if (i % 5 != 4) {
        succeed(k, o);
      } else {
        unknown(k, o);
      }
      if (i % 7 != 3)
        flow(o, i % 2 ? FundFlowKind::Debit : FundFlowKind::Capture, 100, "CNY", "gw-a-" + n, k);
      if (i % 4 == 1) flow(o, FundFlowKind::Debit, 100, i % 8 == 1 ? "USD" : "CNY", "gw-b-" + n, k);
      if (i % 6 == 1) flow(o, FundFlowKind::Refund, i % 12 == 1 ? 100 : 40, "CNY", "gw-c-" + n);
      if (i % 9 == 2) flow(o, FundFlowKind::Credit, 100, "CNY", "gw-d-" + n);
      // Ages, by the object's number: flows and records together, the record alone (it succeeded
      // days before its charge was recorded), or the flows alone (charged days before the SUCCESS).
      const std::string by = std::to_string(i % 4) + " days " + std::to_string(i % 3) + " hours";
      if (i % 10 < 4) age(o, by);
      if (i % 10 == 5 || i % 10 == 6) {
        db_->exec(
            "SET session_replication_role = replica; UPDATE idem.records SET updated_at = "
            "updated_at - interval '" +
            by + "' WHERE biz_id = '" + o + "'");
      }
      if (i % 10 == 7 || i % 10 == 8) {
        db_->exec(
            "SET session_replication_role = replica; UPDATE idem.fund_flows SET created_at = "
            "created_at - interval '" +
            by + "' WHERE biz_id = '" + o + "'");
      }
      if (i % 10 == 9) flow(o, FundFlowKind::Debit, 100, "CNY", "gw-e-" + n, k);  // after ageing
    }
    for (const char* window : {"2 hours", "1 day", "2 days", "30 days"}) {
      for (const char* grace : {"0", "5 minutes", "3 hours"}) {
        QCOMPARE(column(rows(kMoneyMovedWithoutSuccess, window, std::string(grace))),
                 column(rows(kPlainMoneyMoved, window, std::string(grace))));
        QCOMPARE(column(rows(kSuccessWithout, window, std::string(grace))),
                 column(rows(kPlainSuccessWithout, window, std::string(grace))));
      }
      QCOMPARE(column(rows(kOwedRows, window, std::nullopt)),
               column(rows(kPlainOvercharged, window, std::nullopt)));
    }
    // Not a vacuous comparison: each question has answers in the month.
    QVERIFY(rows(kMoneyMovedWithoutSuccess, "30 days").size() > 3);
    QVERIFY(rows(kSuccessWithout, "30 days").size() > 3);
    QVERIFY(rows(kOwedRows, "30 days", std::nullopt).size() > 3);
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

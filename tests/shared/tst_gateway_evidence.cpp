// The gateway's own word decides UNKNOWN: its statement lines, its callbacks and its status
// answers, each written by the gateway's side (idem_ledger) through the protocol functions.
//   * A line or event is matched by exact references only (the key the client put at the gateway,
//     the gateway reference of a recorded flow, the business object when exactly one record has
//     it); amount and currency must agree or it is a mismatch, never a decision.
//   * A matched side effect becomes one fund flow, whichever of callback and statement brought it
//     first, and resolves an UNKNOWN record SUCCESS with the line as evidence.
//   * A file is imported once (again, overlapping, or twice at the same moment), whole or not at
//     all; a line the gateway changed since an earlier file stops the import.
//   * Absence is evidence only in a final statement, only for a gateway that allows it, only once
//     the settlement delay has passed, and never where money moved for the object by another route.
#include <QtTest>
#include <atomic>
#include <future>
#include <latch>
#include <map>
#include <thread>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "login_session.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

using As = test::LoginSession;

struct Line {
  std::string lineId{};
  long long sourceLine = 2;
  std::string kind = "DEBIT";  // empty: not a flow
  long long amount = 2990;
  std::string currency = "CNY";
  std::string key{};
  std::string ref{};
  std::string bizId{};
  bool booked = true;
  std::string bookedAt = "2026-12-01T10:00:00Z";
};

std::string toJson(const std::vector<Line>& lines) {
  std::string out = "[";
  for (const Line& l : lines) {
    if (out.size() > 1) out += ",";
    out += "{\"line_id\":\"" + l.lineId + "\",\"source_line\":" + std::to_string(l.sourceLine) +
           ",\"category\":\"" + (l.kind.empty() ? "fee" : "charge") + "\"" +
           (l.kind.empty() ? "" : ",\"flow_kind\":\"" + l.kind + "\"") +
           ",\"amount_minor\":" + std::to_string(l.amount) + ",\"currency\":\"" + l.currency +
           "\"" + (l.key.empty() ? "" : ",\"idempotency_key\":\"" + l.key + "\"") +
           (l.ref.empty() ? "" : ",\"gateway_ref\":\"" + l.ref + "\"") +
           (l.bizId.empty() ? "" : ",\"biz_id\":\"" + l.bizId + "\"") +
           ",\"booked\":" + (l.booked ? "true" : "false") + ",\"booked_at\":\"" + l.bookedAt +
           "\",\"fields\":{}}";
  }
  return out + "]";
}

struct Imported {
  long long statementId = 0;
  bool alreadyImported = false;
  std::string sqlstate;  // the import's error, empty when it committed
  std::string message;
  long long resolvedFailed = 0;
};

}  // namespace

class TestGatewayEvidence : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::string agent_, ledger_, reconciler_, operator_;
  int files_ = 0;

  long long count(const std::string& sql) { return db_->scalar(sql); }
  std::string field(const std::string& sql) {
    As admin(*db_, "postgres");
    return admin.firstField(sql);
  }
  std::string statusOf(const std::string& key) {
    return field("SELECT status FROM idem.records WHERE idempotency_key = '" + key + "'");
  }
  // The evidence the admin app sends when a person accepts line lineId as a record's side effect.
  static std::string accepting(const std::string& lineId) {
    return "{\"source\": \"statement\", \"gateway\": \"stripe\", \"line_id\": \"" + lineId +
           "\", \"accepted_proposal\": true}";
  }
  std::string resultOf(const std::string& lineId) {
    return field("SELECT result FROM idem.statement_lines WHERE line_id = '" + lineId + "'");
  }

  // The agent claims `key` for `bizId` asking `amount` CNY; its downstream acts and the answer is
  // lost: UNKNOWN.
  // amountJson: the amount as the request spells it (2990.0, "2990"), else `amount`.
  void lostAnswer(const std::string& key, const std::string& bizId, long long amount = 2990,
                  const std::string& amountJson = {}) {
    As agent(*db_, agent_);
    BeginRequest r = test::payRequest(key, bizId);
    r.requestPayload = R"({"amount_minor": )" +
                       (amountJson.empty() ? std::to_string(amount) : amountJson) +
                       R"(, "currency": "CNY"})";
    const BeginResult b = agent.client.begin(r);
    if (b.outcome != Outcome::Executed || !b.claimToken) qFatal("%s was not executed", key.c_str());
    if (!agent.client.markUnknown(key, 1, "no answer within 5s", *b.claimToken).ok())
      qFatal("mark_unknown %s", key.c_str());
  }

  // One file through the importer's three calls, in one transaction, as the gateway's login.
  // A statement of the stripe gateway opened in the caller's transaction, as an import opens it.
  static long long openStatement(pqxx::transaction_base& tx, const std::string& file,
                                 const std::string& sha256) {
    return tx
        .exec_params1("SELECT statement_id FROM idem.open_statement('stripe', 'stripe', $1, $2)",
                      file, sha256)[0]
        .as<long long>();
  }

  Imported import(const std::vector<Line>& lines, const std::string& sha256 = {},
                  const std::string& gateway = "stripe", const std::string& period = {},
                  pqxx::connection* on = nullptr) {
    std::unique_ptr<As> own;
    if (!on) {
      own = std::make_unique<As>(*db_, ledger_);
      on = &own->connection;
    }
    Imported out;
    const std::string sha = sha256.empty()
                                ? QByteArray::number(++files_).rightJustified(64, '0').toStdString()
                                : sha256;
    try {
      pqxx::work tx(*on);
      const pqxx::row o = tx.exec_params1(
          "SELECT statement_id, already_imported FROM idem.open_statement($1, 'stripe', "
          "'day.csv', $2)",
          gateway, sha);
      out.statementId = o[0].as<long long>();
      out.alreadyImported = o[1].as<bool>();
      if (out.alreadyImported) return out;
      tx.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", out.statementId,
                     toJson(lines));
      const std::string from = period.empty() ? "" : period.substr(0, period.find('/'));
      const std::string to = period.empty() ? "" : period.substr(period.find('/') + 1);
      const pqxx::row c = tx.exec_params1(
          "SELECT resolved_failed FROM idem.close_statement($1, $2, nullif($3, '')::timestamptz, "
          "nullif($4, '')::timestamptz, $5)",
          out.statementId, static_cast<long long>(lines.size()), from, to, !period.empty());
      out.resolvedFailed = c[0].as<long long>();
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      out.sqlstate = e.sqlstate();
      out.message = e.what();
    }
    return out;
  }

  // Moves a record's creation into the past (as the superuser, past the guard triggers), so that
  // a settlement delay can have passed.
  // A final statement's period, from five days ago to tomorrow, as "from/to".
  std::string finalPeriodAroundNow() {
    return field("SELECT (now() - interval '5 days')::text") + "/" +
           field("SELECT (now() + interval '1 day')::text");
  }
  // That long ago, as a statement line's booking time.
  std::string utcAgo(const std::string& ago) {
    return field("SELECT to_char((now() - interval '" + ago +
                 "') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
  }
  void createdAgo(const std::string& key, const std::string& ago) {
    db_->exec(
        "SET session_replication_role = replica; UPDATE idem.records SET created_at = now() - "
        "interval '" +
        ago + "' WHERE idempotency_key = '" + key + "'; SET session_replication_role = origin");
  }
  void lastChangedAgo(const std::string& key, const std::string& ago) {
    db_->exec(
        "SET session_replication_role = replica; UPDATE idem.records SET updated_at = now() - "
        "interval '" +
        ago + "' WHERE idempotency_key = '" + key + "'; SET session_replication_role = origin");
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_gateway_evidence");
    agent_ = db_->createLoginRole("agent", "idem_writer");
    ledger_ = db_->createLoginRole("gateway", "idem_ledger");
    reconciler_ = db_->createLoginRole("recon", "idem_reconciler");
    operator_ = db_->createLoginRole("alice", "idem_operator");
  }
  void cleanupTestCase() { db_.reset(); }

  void aLostAnswerIsResolvedByItsStatementLine() {
    lostAnswer("ord-1:pay", "ord-1");
    const Imported i = import({{.lineId = "txn_1", .key = "ord-1:pay", .ref = "ch_1"}});
    QCOMPARE(i.sqlstate, std::string());
    QCOMPARE(statusOf("ord-1:pay"), std::string("SUCCESS"));
    QCOMPARE(resultOf("txn_1"), std::string("matched"));
    // The flow is the gateway's word, under the gateway's reference; the decision names the line.
    QCOMPARE(field("SELECT recorded_by || ' ' || external_ref || ' ' || idempotency_key FROM "
                   "idem.fund_flows WHERE biz_id = 'ord-1'"),
             std::string("ledger ch_1 ord-1:pay"));
    QCOMPARE(field("SELECT actor_kind || ' ' || (evidence->>'source') || ' ' || "
                   "(evidence->>'line_id') FROM idem.transitions WHERE idempotency_key = "
                   "'ord-1:pay' AND to_status = 'SUCCESS'"),
             std::string("reconciler statement txn_1"));
  }

  void aLineForAnotherAmountIsAMismatchNeverADecision() {
    lostAnswer("ord-2:pay", "ord-2", 2990);
    import({{.lineId = "txn_2", .amount = 3990, .key = "ord-2:pay", .ref = "ch_2" }});
    QCOMPARE(resultOf("txn_2"), std::string("mismatched"));
    QCOMPARE(statusOf("ord-2:pay"), std::string("UNKNOWN"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-2'"), 0LL);
    QVERIFY(field("SELECT detail FROM idem.statement_lines WHERE line_id = 'txn_2'")
                .find("3990 CNY and the request asked 2990") != std::string::npos);
    // Another currency is a mismatch too.
    lostAnswer("ord-2b:pay", "ord-2b", 2990);
    import({{.lineId = "txn_2b", .currency = "USD", .key = "ord-2b:pay", .ref = "ch_2b" }});
    QCOMPARE(resultOf("txn_2b"), std::string("mismatched"));
    QCOMPARE(statusOf("ord-2b:pay"), std::string("UNKNOWN"));
  }

  void aLineForAnObjectNobodyClaimedIsUnmatched() {
    import({{.lineId = "txn_3", .ref = "ch_3", .bizId = "never-heard-of" }});
    QCOMPARE(resultOf("txn_3"), std::string("unmatched"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE external_ref = 'ch_3'"), 0LL);
    // A fee is no business object's side effect.
    import({{.lineId = "txn_fee", .kind = "", .amount = 30 }});
    QCOMPARE(resultOf("txn_fee"), std::string("not_a_flow"));
  }

  void aChargeThatNeverHappenedLeavesTheRecordToAPerson() {
    // No line for it in a statement that is not final: nothing is decided either way.
    lostAnswer("ord-4:pay", "ord-4");
    import({{.lineId = "txn_4_other", .ref = "ch_4x", .bizId = "someone-else" }});
    QCOMPARE(statusOf("ord-4:pay"), std::string("UNKNOWN"));
  }

  void theBusinessObjectMatchesOnlyWhenOneRecordHasIt() {
    As admin(*db_, "postgres");
    admin.firstField("SELECT idem.declare_gateway('stripe', ARRAY['payment'], '3 days', false)");
    lostAnswer("ord-5:pay", "ord-5");
    import({{.lineId = "txn_5", .ref = "ch_5", .bizId = "ord-5" }});
    QCOMPARE(resultOf("txn_5"), std::string("matched"));
    QCOMPARE(statusOf("ord-5:pay"), std::string("SUCCESS"));
    // Two records of one object (the first declared FAILED by a person, the second claimed
    // again): the line could be either, and a person decides which.
    lostAnswer("ord-6:pay:a", "ord-6");
    admin.firstField(
        "SELECT result FROM idem.settle('ord-6:pay:a', 2, 'FAILED', 'the gateway "
        "showed nothing that day', NULL, false)");
    lostAnswer("ord-6:pay:b", "ord-6");
    import({{.lineId = "txn_6", .ref = "ch_6", .bizId = "ord-6" }});
    QCOMPARE(resultOf("txn_6"), std::string("unmatched"));
    QCOMPARE(statusOf("ord-6:pay:a"), std::string("FAILED"));
    QCOMPARE(statusOf("ord-6:pay:b"), std::string("UNKNOWN"));
  }

  void aCallbackAndItsStatementLineAreOneFlow() {
    lostAnswer("ord-7:pay", "ord-7");
    As ledger(*db_, ledger_);
    QCOMPARE(ledger.firstField("SELECT result || ' ' || record_status FROM idem.ingest_callback("
                               "'stripe', 'evt_7', 'DEBIT', 2990, 'CNY', 'ch_7', 'ord-7:pay', "
                               "NULL, '{}')"),
             std::string("matched SUCCESS"));
    // Delivered again: nothing new, the first delivery's answer.
    QCOMPARE(ledger.firstField("SELECT already_received::text || ' ' || result FROM "
                               "idem.ingest_callback('stripe', 'evt_7', 'DEBIT', 2990, 'CNY', "
                               "'ch_7', 'ord-7:pay', NULL, '{}')"),
             std::string("true matched"));
    import({{.lineId = "txn_7", .key = "ord-7:pay", .ref = "ch_7" }});
    QCOMPARE(resultOf("txn_7"), std::string("matched"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-7'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.gateway_events WHERE event_id = 'evt_7'"), 1LL);
  }

  void aSecondChargeOfOneObjectIsFlaggedDuplicate() {
    lostAnswer("ord-8:pay", "ord-8");
    import({{.lineId = "txn_8a", .key = "ord-8:pay", .ref = "ch_8a"},
            {.lineId = "txn_8b",
             .sourceLine = 3,
             .key = "ord-8:pay",
             .ref = "ch_8b" }});
    QCOMPARE(resultOf("txn_8a"), std::string("matched"));
    QCOMPARE(resultOf("txn_8b"), std::string("duplicate"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-8' AND duplicate_of "
                   "IS NOT NULL"),
             1LL);
  }

  // A file's flows are written by one statement: the ledger's charge count and its objects'
  // rows still follow each flow, as the whole ledger defines them.
  void aFilesFlowsAreCountedOnceEach() {
    std::vector<Line> lines;
    for (int i = 1; i <= 12; ++i) {
      const std::string n = std::to_string(i);
      lostAnswer("ord-c" + n + ":pay", "ord-c" + n);
      lines.push_back({.lineId = "txn_c" + n,
                       .sourceLine = i + 1,
                       .key = "ord-c" + n + ":pay",
                       .ref = "ch_c" + n});
    }
    lines.push_back({.lineId = "txn_c1b", .sourceLine = 20, .key = "ord-c1:pay", .ref = "ch_c1b"});
    QVERIFY(import(lines).sqlstate.empty());
    QCOMPARE(resultOf("txn_c1b"), std::string("duplicate"));
    QCOMPARE(count("SELECT charges FROM idem.charged_objects WHERE biz_id = 'ord-c1'"), 2LL);
    QCOMPARE(count("SELECT count(*) FROM idem.charged_objects WHERE biz_id LIKE 'ord-c%'"), 12LL);
    // Every object of the ledger: its count is its DEBIT and CAPTURE flows, and it has its row.
    QCOMPARE(count("SELECT count(*) FROM (SELECT biz_type, biz_id, count(*) AS n "
                   "FROM idem.fund_flows WHERE kind::text IN ('DEBIT', 'CAPTURE') GROUP BY 1, 2) "
                   "AS f FULL JOIN idem.charged_objects AS o USING (biz_type, biz_id) "
                   "WHERE o.charges IS DISTINCT FROM f.n"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM (SELECT DISTINCT biz_type, biz_id FROM idem.fund_flows) "
                   "AS f LEFT JOIN idem.ledger_objects AS o USING (biz_type, biz_id) "
                   "WHERE o.biz_id IS NULL"),
             0LL);
  }

  // An unmatched line an operator accepts as a record's side effect becomes it, in the settle's
  // transaction; one that cannot be it refuses the settle, and nothing is written.
  void anAcceptedLineBecomesTheRecordsSideEffect() {
    lostAnswer("ord-acc:pay", "ord-acc", 1500);
    lostAnswer("ord-acc2:pay", "ord-acc2", 1500);
    lostAnswer("ord-acc3:pay", "ord-acc3", 1700);
    import(
        {{.lineId = "txn_accobj",
          .amount = 1500,
          .ref = "ch_accobj",
          .bizId = "ord-elsewhere" }});
    import({{.lineId = "txn_acc", .amount = 1500, .ref = "ch_acc"},
            {.lineId = "txn_accfee",
             .sourceLine = 3,
             .kind = "",
             .amount = 45 }});
    QCOMPARE(resultOf("txn_acc"), std::string("unmatched"));
    As alice(*db_, operator_);
    const auto settle = [&](As& who, const std::string& key, const std::string& line) {
      return who.sqlstateOf("SELECT idem.settle('" + key + "', 2, 'SUCCESS', 'line " + line +
                            " is this payment', '" + accepting(line) + "')");
    };
    // Another amount, or a fee: refused, the record stays UNKNOWN and the line unmatched.
    QCOMPARE(settle(alice, "ord-acc3:pay", "txn_acc"), std::string("22023"));
    QCOMPARE(settle(alice, "ord-acc:pay", "txn_accfee"), std::string("22023"));
    QCOMPARE(settle(alice, "ord-acc:pay", "txn_none"), std::string("22023"));
    QCOMPARE(resultOf("txn_accobj"), std::string("unmatched"));  // it names another object
    QCOMPARE(settle(alice, "ord-acc:pay", "txn_accobj"), std::string("22023"));
    QCOMPARE(statusOf("ord-acc3:pay"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("ord-acc:pay"), std::string("UNKNOWN"));
    QCOMPARE(resultOf("txn_acc"), std::string("unmatched"));

    // Two operators accept the one line for two records at once: one settles, the other is
    // refused and writes nothing.
    As bob(*db_, operator_);
    pqxx::work first(alice.connection);
    first.exec("SELECT idem.settle('ord-acc:pay', 2, 'SUCCESS', 'line txn_acc is this payment', '" +
               accepting("txn_acc") + "')");
    std::string second;
    std::thread racer([&] { second = settle(bob, "ord-acc2:pay", "txn_acc"); });
    QTest::qWait(300);  // the second waits on the line the first holds
    first.commit();
    racer.join();
    QCOMPARE(second, std::string("22023"));
    QCOMPARE(statusOf("ord-acc:pay"), std::string("SUCCESS"));
    QCOMPARE(statusOf("ord-acc2:pay"), std::string("UNKNOWN"));
    QCOMPARE(field("SELECT l.result || ' ' || l.record_key || ' ' || f.idempotency_key || ' ' || "
                   "f.external_ref || ' ' || f.recorded_by FROM idem.statement_lines l JOIN "
                   "idem.fund_flows f ON f.id = l.flow_id WHERE l.line_id = 'txn_acc'"),
             std::string("matched ord-acc:pay ord-acc:pay ch_acc ledger"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'ord-acc%'"), 1LL);
    // Without "accepted_proposal", a settle only settles.
    import({{.lineId = "txn_acc4", .amount = 1500, .ref = "ch_acc4" }});
    QCOMPARE(alice.sqlstateOf("SELECT idem.settle('ord-acc2:pay', 2, 'SUCCESS', 'seen on the "
                              "gateway dashboard', '{\"source\": \"statement\", \"gateway\": "
                              "\"stripe\", \"line_id\": \"txn_acc4\"}')"),
             std::string());
    QCOMPARE(resultOf("txn_acc4"), std::string("unmatched"));
  }

  // An operator accepts key-less lines as their records' charges while the gateway's next file,
  // naming the same charges with their keys, is imported: both decide the same records and write
  // the same flows at once, in opposite orders (a deadlock PostgreSQL breaks by rolling one back,
  // which is run again). Whoever comes first decides; each charge is one flow, each record
  // SUCCESS once, and nothing is flagged a second charge.
  void anOperatorAndAnImportDecidingTheSameRecordsRecordEachChargeOnce() {
    constexpr int kRecords = 16;
    std::vector<Line> keyless;
    std::vector<Line> keyed;
    for (int i = 0; i < kRecords; ++i) {
      const std::string n = std::to_string(i);
      lostAnswer("ord-cc" + n + ":pay", "ord-cc" + n);
      keyless.push_back({.lineId = "txn_cc" + n, .ref = "ch_cc" + n});
      keyed.push_back(
          {.lineId = "txn_cc" + n + "k", .key = "ord-cc" + n + ":pay", .ref = "ch_cc" + n});
    }
    QVERIFY(import(keyless).sqlstate.empty());
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_cc%' "
                   "AND result = 'unmatched'"),
             static_cast<long long>(kRecords));

    std::atomic<int> retries{0};
    std::string importError;
    std::map<std::string, int> settled;  // settle's answer -> how many
    std::latch ready(2);                 // both sessions open, then both at once
    std::jthread gateway([&] {
      // The importer's three calls in one transaction; one rolled back by a deadlock or a
      // serialization failure is run again whole, as idemctl import-statement does.
      As ledger(*db_, ledger_);
      ready.arrive_and_wait();
      for (int attempt = 0; attempt < 20; ++attempt) {
        try {
          importError =
              import(keyed, std::string(64, '7'), "stripe", {}, &ledger.connection).sqlstate;
          return;
        } catch (const pqxx::transaction_rollback&) {
          ++retries;
        }
      }
      importError = "gave up";
    });
    // The operator's settles through the protocol client the admin app uses, which runs a settle
    // rolled back by a deadlock again.
    As alice(*db_, operator_);
    ready.arrive_and_wait();
    for (int i = kRecords - 1; i >= 0; --i) {
      const std::string n = std::to_string(i);
      try {
        const ChangeResult r =
            alice.client.settle("ord-cc" + n + ":pay", 2, RecordStatus::Success,
                                "line txn_cc" + n + " is this payment", accepting("txn_cc" + n));
        ++settled[std::string(format(r.result))];
      } catch (const DatabaseError& e) {
        ++settled[e.sqlstate()];  // the import matched the line's reference first: 22023
      }
    }
    gateway.join();
    for (const auto& [answer, n] : settled) qInfo("settle answered %s: %d", answer.c_str(), n);
    qInfo("imports rolled back and run again: %d", retries.load());
    QCOMPARE(importError, std::string());
    QCOMPARE(settled["ok"] + settled["conflict"] + settled["22023"], kRecords);
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE idempotency_key LIKE 'ord-cc%' "
                   "AND status = 'SUCCESS'"),
             static_cast<long long>(kRecords));
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key LIKE 'ord-cc%' "
                   "AND to_status = 'SUCCESS'"),
             static_cast<long long>(kRecords));
    // One flow a charge, under its record, and no second charge of any object.
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'ord-cc%'"),
             static_cast<long long>(kRecords));
    QCOMPARE(count("SELECT count(DISTINCT external_ref) FROM idem.fund_flows "
                   "WHERE biz_id LIKE 'ord-cc%' AND idempotency_key = biz_id || ':pay'"),
             static_cast<long long>(kRecords));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'ord-cc%' "
                   "AND duplicate_of IS NOT NULL"),
             0LL);
    // The keyed lines all matched; a key-less line matched when its settle came first, else it
    // stays unmatched beside the flow its keyed twin matched: never mismatched, never a duplicate.
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_cc%k' "
                   "AND result = 'matched'"),
             static_cast<long long>(kRecords));
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_cc%' "
                   "AND result NOT IN ('matched', 'unmatched')"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_cc%' "
                   "AND line_id NOT LIKE '%k' AND result = 'matched'"),
             static_cast<long long>(settled["ok"]));
  }

  // A line without the gateway's reference is known by its line id in its gateway's namespace:
  // two gateways' lines of the same id are two side effects, never one flow.
  void linesWithoutAReferenceAreTheirGatewaysOwn() {
    lostAnswer("ord-ns1:pay", "ord-ns1");
    lostAnswer("ord-ns2:pay", "ord-ns2");
    QVERIFY(import({{.lineId = "L-ns", .key = "ord-ns1:pay"}}, {}, "stripe").sqlstate.empty());
    QVERIFY(import({{.lineId = "L-ns", .key = "ord-ns2:pay"}}, {}, "adyen").sqlstate.empty());
    QCOMPARE(statusOf("ord-ns1:pay"), std::string("SUCCESS"));
    QCOMPARE(statusOf("ord-ns2:pay"), std::string("SUCCESS"));
    QCOMPARE(field("SELECT string_agg(l.gateway || '=' || l.result || ':' || f.external_ref || ':' "
                   "|| f.biz_id, ' ' ORDER BY l.gateway) FROM idem.statement_lines l JOIN "
                   "idem.fund_flows f ON f.id = l.flow_id WHERE l.line_id = 'L-ns'"),
             std::string("adyen=matched:adyen:L-ns:ord-ns2 stripe=matched:stripe:L-ns:ord-ns1"));
  }

  // The reconciler's pass decides from the record's own side effect: a refund matched to the
  // record is no evidence that the charge happened, and meeting it first does not hide the
  // charge's line behind it.
  void theReconcilersPassDecidesFromTheSideEffectNotItsReversal() {
    As agent(*db_, agent_);
    BeginRequest r = test::payRequest("ord-rv:pay", "ord-rv", "payment", std::chrono::seconds(1));
    r.requestPayload = R"({"amount_minor": 2990, "currency": "CNY"})";
    QVERIFY(agent.client.begin(r).outcome == Outcome::Executed);
    // Both arrive while the claim is live: neither decides yet.
    import(
        {{.lineId = "txn_rv",
          .kind = "REFUND",
          .amount = 990,
          .key = "ord-rv:pay",
          .ref = "re_rv" }});
    import({{.lineId = "txn_rv_ch", .key = "ord-rv:pay", .ref = "ch_rv" }});
    QCOMPARE(resultOf("txn_rv"), std::string("matched"));
    QCOMPARE(resultOf("txn_rv_ch"), std::string("matched"));
    QCOMPARE(statusOf("ord-rv:pay"), std::string("PROCESSING"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    As recon(*db_, reconciler_);
    recon.firstField("SELECT resolved_success FROM idem.resolve_from_gateway_evidence()");
    QCOMPARE(statusOf("ord-rv:pay"), std::string("SUCCESS"));
    QCOMPARE(field("SELECT evidence->>'ref' FROM idem.transitions WHERE idempotency_key = "
                   "'ord-rv:pay' AND to_status = 'SUCCESS'"),
             std::string("txn_rv_ch"));
  }

  void aFileIsImportedOnceAndOverlapsChangeNothing() {
    lostAnswer("ord-9:pay", "ord-9");
    const std::string sha(64, 'e');
    const std::vector<Line> day = {{.lineId = "txn_9", .key = "ord-9:pay", .ref = "ch_9"},
                                   {.lineId = "txn_9f", .sourceLine = 3, .kind = "", .amount = 9}};
    const Imported first = import(day, sha);
    QVERIFY(!first.alreadyImported);
    const long long flows = count("SELECT count(*) FROM idem.fund_flows");
    const long long transitions = count("SELECT count(*) FROM idem.transitions");
    const Imported again = import(day, sha);
    QVERIFY(again.alreadyImported);
    QCOMPARE(again.statementId, first.statementId);
    // Another file repeating both lines and adding one: only the new one is new.
    std::vector<Line> wider = day;
    wider.push_back({.lineId = "txn_9n", .sourceLine = 4, .kind = "", .amount = 7});
    const Imported overlap = import(wider);
    QCOMPARE(overlap.sqlstate, std::string());
    QCOMPARE(count("SELECT new_lines FROM idem.statements WHERE id = " +
                   std::to_string(overlap.statementId)),
             1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows"), flows);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions"), transitions);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_9%'"), 3LL);
  }

  void concurrentImportsOfOneFileImportItOnce() {
    lostAnswer("ord-10:pay", "ord-10");
    const std::string sha(64, 'c');
    const std::vector<Line> day = {{.lineId = "txn_10", .key = "ord-10:pay", .ref = "ch_10"}};
    // Both open the same file at once; the second waits on the first's unique entry.
    As a(*db_, ledger_);
    As b(*db_, ledger_);
    pqxx::work first(a.connection);
    const pqxx::row opened = first.exec_params1(
        "SELECT statement_id, already_imported FROM idem.open_statement('stripe', 'stripe', "
        "'day.csv', $1)",
        sha);
    QVERIFY(!opened[1].as<bool>());
    auto second = std::async(std::launch::async,
                             [&] { return import(day, sha, "stripe", {}, &b.connection); });
    QVERIFY(second.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
    first.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", opened[0].as<long long>(),
                      toJson(day));
    first.exec_params("SELECT * FROM idem.close_statement($1, 1, NULL, NULL, false)",
                      opened[0].as<long long>());
    first.commit();
    const Imported other = second.get();
    QVERIFY(other.alreadyImported);
    QCOMPARE(other.statementId, opened[0].as<long long>());
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE file_sha256 = '" + sha + "'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-10'"), 1LL);
  }

  // Two files that share a line, imported at the same moment: the second waits on the first's
  // line, then stops with 40001 naming it, nothing of it written; run again, it adds only what
  // is new. The shared line, its flow and the record's decision each exist once.
  void concurrentImportsOfOverlappingFilesKeepEachLineOnce() {
    lostAnswer("ord-ov:pay", "ord-ov");
    const std::vector<Line> first = {
        {.lineId = "txn_ov", .key = "ord-ov:pay", .ref = "ch_ov"},
        {.lineId = "txn_ovf", .sourceLine = 3, .kind = "", .amount = 9}};
    const std::vector<Line> second = {
        {.lineId = "txn_ovn", .sourceLine = 2, .kind = "", .amount = 7},
        {.lineId = "txn_ov", .sourceLine = 3, .key = "ord-ov:pay", .ref = "ch_ov"}};
    As a(*db_, ledger_);
    As b(*db_, ledger_);
    pqxx::work tx(a.connection);
    const long long statement = openStatement(tx, "a.csv", std::string(64, '3'));
    tx.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", statement, toJson(first));
    // (import() reports SQL errors; a rollback of the transaction is what the caller retries.)
    auto racing = std::async(std::launch::async, [&]() -> Imported {
      try {
        return import(second, std::string(64, '4'), "stripe", {}, &b.connection);
      } catch (const pqxx::serialization_failure& e) {
        return {.sqlstate = "40001", .message = e.what()};
      }
    });
    QVERIFY(racing.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
    tx.exec_params("SELECT * FROM idem.close_statement($1, 2, NULL, NULL, false)", statement);
    tx.commit();
    const Imported stopped = racing.get();
    QCOMPARE(stopped.sqlstate, std::string("40001"));
    QVERIFY2(stopped.message.find("line 3: line id 'txn_ov' was imported meanwhile by a "
                                  "concurrent import of another file") != std::string::npos,
             stopped.message.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id = 'txn_ovn'"), 0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.statements WHERE file_sha256 = '" +
                   std::string(64, '4') + "'"),
             0LL);

    const Imported again = import(second, std::string(64, '4'));
    QCOMPARE(again.sqlstate, std::string());
    QCOMPARE(count("SELECT new_lines FROM idem.statements WHERE id = " +
                   std::to_string(again.statementId)),
             1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id LIKE 'txn_ov%'"), 3LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-ov'"), 1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'ord-ov:pay' "
                   "AND to_status = 'SUCCESS'"),
             1LL);
    QCOMPARE(statusOf("ord-ov:pay"), std::string("SUCCESS"));
  }

  // The claimant's answer arrives while an import that resolves its record is still open: it waits
  // for the import and finds the record decided. One decision, one flow, whichever answered.
  void aClaimantAnsweringDuringTheImportFindsItDecidedOnce() {
    As agent(*db_, agent_);
    const BeginResult b = agent.client.begin(test::payRequest("ord-la:pay", "ord-la"));
    QVERIFY(b.claimToken.has_value());
    QVERIFY(agent.client.markUnknown("ord-la:pay", 1, "no answer within 5s", *b.claimToken).ok());
    As ledger(*db_, ledger_);
    pqxx::work tx(ledger.connection);
    const long long statement = openStatement(tx, "la.csv", std::string(64, '5'));
    tx.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", statement,
                   toJson({{.lineId = "txn_la", .key = "ord-la:pay", .ref = "ch_la"}}));
    auto late = std::async(std::launch::async, [&] {
      return agent.client.complete("ord-la:pay", 2, R"({"charged": true})", *b.claimToken);
    });
    QVERIFY(late.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
    tx.exec_params("SELECT * FROM idem.close_statement($1, 1, NULL, NULL, false)", statement);
    tx.commit();
    const ChangeResult answered = late.get();
    QCOMPARE(answered.result, ResultCode::Conflict);
    QCOMPARE(answered.version, std::optional<int>(3));
    QCOMPARE(statusOf("ord-la:pay"), std::string("SUCCESS"));
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'ord-la:pay' "
                   "AND to_status = 'SUCCESS'"),
             1LL);
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id = 'ord-la'"), 1LL);
  }

  void aLineChangedSinceAnEarlierFileStopsTheWholeImport() {
    import({{.lineId = "txn_11", .kind = "", .amount = 100 }});
    const long long statements = count("SELECT count(*) FROM idem.statements");
    const Imported changed =
        import({{.lineId = "txn_11b", .kind = "", .amount = 5},
                {.lineId = "txn_11", .sourceLine = 3, .kind = "", .amount = 101}});
    QCOMPARE(changed.sqlstate, std::string("23505"));
    QVERIFY2(changed.message.find("line 3: line id 'txn_11' was imported from statement") !=
                 std::string::npos,
             changed.message.c_str());
    QCOMPARE(count("SELECT count(*) FROM idem.statements"), statements);
    QCOMPARE(count("SELECT count(*) FROM idem.statement_lines WHERE line_id = 'txn_11b'"), 0LL);
    // The same id twice in one file is named by both lines.
    const Imported twice = import({{.lineId = "txn_12", .kind = "", .amount = 1},
                                   {.lineId = "txn_12", .sourceLine = 5, .kind = "", .amount = 1}});
    QCOMPARE(twice.sqlstate, std::string("23505"));
    QVERIFY2(twice.message.find("line 5: line id 'txn_12' repeats line 2") != std::string::npos,
             twice.message.c_str());
  }

  void aPendingEntryDecidesOnlyOnceBooked() {
    lostAnswer("ord-13:pay", "ord-13");
    import({{.lineId = "ntry_13", .key = "ord-13:pay", .ref = "ref_13", .booked = false }});
    QCOMPARE(resultOf("ntry_13"), std::string("pending"));
    QCOMPARE(statusOf("ord-13:pay"), std::string("UNKNOWN"));
    import({{.lineId = "ntry_13", .key = "ord-13:pay", .ref = "ref_13", .booked = true }});
    QCOMPARE(resultOf("ntry_13"), std::string("matched"));
    QCOMPARE(statusOf("ord-13:pay"), std::string("SUCCESS"));
  }

  void absenceIsEvidenceOnlyInAFinalStatementWhereAllowed() {
    As admin(*db_, "postgres");
    admin.firstField("SELECT idem.declare_gateway('wallet', ARRAY['payment'], '1 day', false)");
    lostAnswer("ord-14:pay", "ord-14");  // never charged: no line anywhere
    createdAgo("ord-14:pay", "3 days");
    lostAnswer("ord-15:pay", "ord-15");  // too recent: the delay has not passed
    lostAnswer("ord-16:pay", "ord-16");  // money moved for it by another route
    createdAgo("ord-16:pay", "3 days");
    As ledger(*db_, ledger_);
    ledger.firstField(
        "SELECT * FROM idem.record_fund_flow('payment', 'ord-16', 'FREEZE', 2990, "
        "'CNY', 'hold-16', NULL)");
    const std::string lastFiveDays = [&] {
      return field("SELECT (now() - interval '5 days')::text") + "/" +
             field("SELECT (now() + interval '1 day')::text");
    }();
    // Not enabled: a final statement's silence decides nothing.
    import({{.lineId = "w_1", .kind = "", .amount = 1 }}, {}, "wallet", lastFiveDays);
    QCOMPARE(statusOf("ord-14:pay"), std::string("UNKNOWN"));
    // Enabled, but the statement is not final: nothing.
    admin.firstField("SELECT idem.declare_gateway('wallet', ARRAY['payment'], '1 day', true)");
    import({{.lineId = "w_2", .kind = "", .amount = 1 }}, {}, "wallet");
    QCOMPARE(statusOf("ord-14:pay"), std::string("UNKNOWN"));
    // Enabled and final: the never-charged record is FAILED with the statement as evidence, and
    // the other two stay for a person or a later pass.
    const Imported final =
        import({{.lineId = "w_3", .kind = "", .amount = 1}}, {}, "wallet", lastFiveDays);
    QCOMPARE(final.resolvedFailed, 1LL);
    QCOMPARE(statusOf("ord-14:pay"), std::string("FAILED"));
    QCOMPARE(field("SELECT evidence->>'source' FROM idem.transitions WHERE idempotency_key = "
                   "'ord-14:pay' AND to_status = 'FAILED'"),
             std::string("statement_absence"));
    QCOMPARE(statusOf("ord-15:pay"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("ord-16:pay"), std::string("UNKNOWN"));
    // Another gateway's final statement says nothing about this one's records.
    admin.firstField("SELECT idem.declare_gateway('bank', ARRAY['refund'], '1 day', true)");
    lostAnswer("ord-17:pay", "ord-17");
    createdAgo("ord-17:pay", "3 days");
    import({{.lineId = "b_1", .kind = "", .amount = 1 }}, {}, "bank", lastFiveDays);
    QCOMPARE(statusOf("ord-17:pay"), std::string("UNKNOWN"));
  }

  void aLineArrivingDuringALiveLeaseDecidesOnTheReconcilersPass() {
    As agent(*db_, agent_);
    BeginRequest r = test::payRequest("ord-18:pay", "ord-18", "payment", std::chrono::seconds(1));
    r.requestPayload = R"({"amount_minor": 2990, "currency": "CNY"})";
    QVERIFY(agent.client.begin(r).outcome == Outcome::Executed);
    import({{.lineId = "txn_18", .key = "ord-18:pay", .ref = "ch_18" }});
    QCOMPARE(resultOf("txn_18"), std::string("matched"));
    QCOMPARE(statusOf("ord-18:pay"), std::string("PROCESSING"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    As recon(*db_, reconciler_);
    QCOMPARE(recon.firstField("SELECT resolved_success FROM idem.resolve_from_gateway_evidence()"),
             std::string("1"));
    QCOMPARE(statusOf("ord-18:pay"), std::string("SUCCESS"));
  }

  void aStatusAnswerDecidesOnlyWhenItKnows() {
    As ledger(*db_, ledger_);
    lostAnswer("ord-19:pay", "ord-19");
    QCOMPARE(ledger.firstField("SELECT result FROM idem.record_lookup_answer('stripe', "
                               "'ord-19:pay', 'q-19-1', NULL, NULL, NULL, NULL, NULL, '{}')"),
             std::string("pending"));
    QCOMPARE(statusOf("ord-19:pay"), std::string("UNKNOWN"));
    // "No such payment" about a call made a moment ago may only mean the gateway has not recorded
    // it yet: it decides nothing until the record's last change is old enough (10 minutes here).
    QCOMPARE(ledger.firstField("SELECT record_status FROM idem.record_lookup_answer('stripe', "
                               "'ord-19:pay', 'q-19-2', false, NULL, NULL, NULL, NULL, '{}')"),
             std::string("UNKNOWN"));
    QVERIFY(field("SELECT detail FROM idem.gateway_events WHERE event_id = 'q-19-2'")
                .find("ask again later") != std::string::npos);
    lastChangedAgo("ord-19:pay", "9 minutes");
    QCOMPARE(ledger.firstField("SELECT record_status FROM idem.record_lookup_answer('stripe', "
                               "'ord-19:pay', 'q-19-3', false, NULL, NULL, NULL, NULL, '{}')"),
             std::string("UNKNOWN"));
    lastChangedAgo("ord-19:pay", "11 minutes");
    QCOMPARE(ledger.firstField("SELECT record_status FROM idem.record_lookup_answer('stripe', "
                               "'ord-19:pay', 'q-19-4', false, NULL, NULL, NULL, NULL, '{}')"),
             std::string("FAILED"));
    // A gateway that answers with another amount is a mismatch, not a decision.
    lostAnswer("ord-20:pay", "ord-20");
    QCOMPARE(ledger.firstField("SELECT result || ' ' || record_status FROM "
                               "idem.record_lookup_answer('stripe', 'ord-20:pay', 'q-20', true, "
                               "'DEBIT', 1, 'CNY', 'ch_20', '{}')"),
             std::string("mismatched UNKNOWN"));
    // "It did not happen" never overrides a ledger that says it did.
    lostAnswer("ord-21:pay", "ord-21");
    ledger.firstField(
        "SELECT * FROM idem.record_fund_flow('payment', 'ord-21', 'DEBIT', 2990, "
        "'CNY', 'ch_21', 'ord-21:pay')");
    lastChangedAgo("ord-21:pay", "1 hour");
    QCOMPARE(ledger.firstField("SELECT record_status FROM idem.record_lookup_answer('stripe', "
                               "'ord-21:pay', 'q-21', false, NULL, NULL, NULL, NULL, '{}')"),
             std::string("UNKNOWN"));
    QVERIFY(field("SELECT detail FROM idem.gateway_events WHERE event_id = 'q-21'")
                .find("side_effect_recorded") != std::string::npos);
  }

  // A login of the gateway's side cannot lend the owner a table of its own: the import's batch
  // tables are the function's, and a caller's table of the same name stops it.
  void aCallersTableCannotBorrowTheOwnersRights() {
    As ledger(*db_, ledger_);
    pqxx::work tx(ledger.connection);
    tx.exec("CREATE TEMP TABLE statement_batch (line_id text) ON COMMIT DROP");
    tx.exec("GRANT ALL ON pg_temp.statement_batch TO idem_owner");
    const long long statement = openStatement(tx, "x.csv", std::string(64, 'b'));
    try {
      tx.exec_params("SELECT idem.add_statement_lines($1, '[]')", statement);
      QFAIL("add_statement_lines used the caller's table");
    } catch (const pqxx::sql_error& e) {
      QVERIFY2(
          std::string(e.what()).find("that idem did not make is in the way") != std::string::npos,
          e.what());
    }
  }

  // Lines go only into a statement the same transaction opened; a setting cannot say otherwise.
  void aClosedStatementTakesNoMoreLines() {
    const Imported day = import({{.lineId = "closed_1", .kind = "", .amount = 1}});
    As ledger(*db_, ledger_);
    QCOMPARE(ledger.sqlstateOf("SELECT set_config('idem.open_statement', '" +
                               std::to_string(day.statementId) +
                               "', false); SELECT idem.add_statement_lines(" +
                               std::to_string(day.statementId) + ", '[]')"),
             std::string("22023"));
    QCOMPARE(
        ledger.sqlstateOf("SELECT * FROM idem.close_statement(" + std::to_string(day.statementId) +
                          ", 1, '2000-01-01', '2100-01-01', true)"),
        std::string("22023"));
  }

  // Exact references only, and every one must agree: a key naming another business object, an
  // amount the request cannot state exactly, a reference another gateway's flow already holds.
  void everyReferenceMustAgree() {
    lostAnswer("ord-30:pay", "ord-30");
    import({{.lineId = "txn_30", .key = "ord-30:pay", .ref = "ch_30", .bizId = "ord-31" }});
    QCOMPARE(resultOf("txn_30"), std::string("mismatched"));
    QCOMPARE(statusOf("ord-30:pay"), std::string("UNKNOWN"));

    As agent(*db_, agent_);
    for (const auto& [key, amount] : {std::pair{"ord-32:pay", "2990.0"}, {"ord-33:pay", "29.9"}}) {
      BeginRequest r = test::payRequest(key, std::string(key).substr(0, 6));
      r.requestPayload = std::string(R"({"amount_minor": )") + amount + R"(, "currency": "CNY"})";
      const BeginResult b = agent.client.begin(r);
      QVERIFY(agent.client.markUnknown(key, 1, "no answer", *b.claimToken).ok());
    }
    import({{.lineId = "txn_32", .key = "ord-32:pay", .ref = "ch_32"},
            {.lineId = "txn_33",
             .sourceLine = 3,
             .key = "ord-33:pay",
             .ref = "ch_33" }});
    QCOMPARE(statusOf("ord-32:pay"), std::string("SUCCESS"));  // 2990.0 is 2990
    QCOMPARE(resultOf("txn_33"), std::string("mismatched"));   // 29.9 is no amount of minor units
    QCOMPARE(statusOf("ord-33:pay"), std::string("UNKNOWN"));

    // A line without the gateway's reference is known by its own id, in its gateway's namespace:
    // another gateway's flow of the same name is not it.
    lostAnswer("ord-34:pay", "ord-34");
    lostAnswer("ord-35:pay", "ord-35", 5000);
    import({{.lineId = "ref-x", .key = "ord-34:pay" }}, {}, "gw-a");
    import({{.lineId = "ref-x", .amount = 5000, .key = "ord-35:pay" }}, {}, "gw-b");
    QCOMPARE(statusOf("ord-35:pay"), std::string("SUCCESS"));
    QCOMPARE(count("SELECT count(*) FROM idem.fund_flows WHERE biz_id IN ('ord-34', 'ord-35')"),
             2LL);
  }

  // The gateway's "it did not happen" decides only for a business type it carries, and never
  // against what a gateway said before.
  void aNotHappenedAnswerNeverOverridesMoneyMoving() {
    As ledger(*db_, ledger_);
    lostAnswer("ord-36:pay", "ord-36");
    ledger.firstField(
        "SELECT * FROM idem.ingest_callback('stripe', 'evt_36', 'DEBIT', 3090, 'CNY', "
        "'ch_36', 'ord-36:pay', NULL, '{}')");  // another amount: mismatched
    lastChangedAgo("ord-36:pay", "1 hour");     // old enough for "did not happen" to count
    ledger.firstField(
        "SELECT * FROM idem.record_lookup_answer('stripe', 'ord-36:pay', 'q-36', "
        "false, NULL, NULL, NULL, NULL, '{}')");
    QCOMPARE(statusOf("ord-36:pay"), std::string("UNKNOWN"));
    QVERIFY(field("SELECT detail FROM idem.gateway_events WHERE event_id = 'q-36'")
                .find("reported money moving") != std::string::npos);
    lostAnswer("ord-37:pay", "ord-37");
    ledger.firstField(
        "SELECT * FROM idem.record_lookup_answer('otherpsp', 'ord-37:pay', 'q-37', "
        "false, NULL, NULL, NULL, NULL, '{}')");
    QCOMPARE(statusOf("ord-37:pay"), std::string("UNKNOWN"));
    QVERIFY(field("SELECT detail FROM idem.gateway_events WHERE event_id = 'q-37'")
                .find("not declared to carry payment") != std::string::npos);
  }

  // Absence is never evidence while money the gateway moved could be the record's: a callback
  // naming only its business object, or a line of its amount that nothing explains.
  void absenceYieldsToUnexplainedMoney() {
    As admin(*db_, "postgres");
    admin.firstField("SELECT idem.declare_gateway('psp', ARRAY['payment'], '1 day', true)");
    lostAnswer("ord-38:pay", "ord-38");
    createdAgo("ord-38:pay", "3 days");
    lostAnswer("ord-39:pay", "ord-39");
    createdAgo("ord-39:pay", "3 days");
    As ledger(*db_, ledger_);
    ledger.firstField(
        "SELECT * FROM idem.ingest_callback('other', 'evt_38', 'DEBIT', 2990, 'CNY', "
        "'ch_38', NULL, 'ord-38', '{}')");
    const std::string period = finalPeriodAroundNow();
    const std::string threeDaysAgo = utcAgo("3 days");
    const Imported final =
        import({{.lineId = "psp_1", .ref = "ch_39x", .bookedAt = threeDaysAgo}}, {}, "psp", period);
    QCOMPARE(final.sqlstate, std::string());
    QCOMPARE(resultOf("psp_1"), std::string("unmatched"));
    QCOMPARE(final.resolvedFailed, 0LL);
    QCOMPARE(statusOf("ord-38:pay"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("ord-39:pay"), std::string("UNKNOWN"));
  }

  // The request's amount is read by one rule wherever it meets the gateway's word: 2990.0 and
  // "2990" ask for the 2990 an unexplained line moved, so absence decides neither; "29.90" is no
  // whole number of minor units and could be any amount, so it yields to the line too.
  void absenceYieldsToALineOfTheRequestsAmountHoweverItIsWritten() {
    As admin(*db_, "postgres");
    admin.firstField("SELECT idem.declare_gateway('psp', ARRAY['payment'], '1 day', true)");
    lostAnswer("ord-40:pay", "ord-40", 0, "2990.0");
    lostAnswer("ord-41:pay", "ord-41", 0, R"("2990")");
    lostAnswer("ord-42:pay", "ord-42", 0, R"("29.90")");
    lostAnswer("ord-43:pay", "ord-43", 0, "3990.0");
    for (const char* key : {"ord-40:pay", "ord-41:pay", "ord-42:pay", "ord-43:pay"})
      createdAgo(key, "3 days");
    const std::string period = finalPeriodAroundNow();
    const std::string threeDaysAgo = utcAgo("3 days");
    const Imported final =
        import({{.lineId = "psp_2", .ref = "ch_40x", .bookedAt = threeDaysAgo}}, {}, "psp", period);
    QCOMPARE(final.sqlstate, std::string());
    QCOMPARE(resultOf("psp_2"), std::string("unmatched"));
    QCOMPARE(statusOf("ord-40:pay"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("ord-41:pay"), std::string("UNKNOWN"));
    QCOMPARE(statusOf("ord-42:pay"), std::string("UNKNOWN"));
    // A line of another amount is no reason to wait: the final statement holds none for it.
    QCOMPARE(statusOf("ord-43:pay"), std::string("FAILED"));
    QCOMPARE(final.resolvedFailed, 1LL);
  }

  void onlyTheGatewaysSideWritesItsEvidence() {
    As agent(*db_, agent_);
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.open_statement('stripe', 'stripe', 'x', '" +
                              std::string(64, 'f') + "')"),
             std::string("42501"));
    QCOMPARE(agent.sqlstateOf("SELECT * FROM idem.ingest_callback('stripe', 'evt_x', 'DEBIT', 1, "
                              "'CNY', 'ch_x', 'k', NULL, '{}')"),
             std::string("42501"));
    As ledger(*db_, ledger_);
    QCOMPARE(ledger.sqlstateOf("INSERT INTO idem.statement_lines (gateway, line_id, statement_id, "
                               "source_line, category, amount_minor, currency, booked, fields, "
                               "result) VALUES ('stripe', 'forged', 1, 1, 'charge', 1, 'CNY', "
                               "true, '{}', 'matched')"),
             std::string("42501"));
    QCOMPARE(ledger.sqlstateOf("SELECT idem.declare_gateway('stripe', ARRAY['payment'], "
                               "'0', true)"),
             std::string("42501"));
    // Lines go only into a statement this very transaction opened.
    QCOMPARE(ledger.sqlstateOf("SELECT idem.add_statement_lines(1, '[]')"), std::string("22023"));
  }
};

QTEST_GUILESS_MAIN(TestGatewayEvidence)
#include "tst_gateway_evidence.moc"

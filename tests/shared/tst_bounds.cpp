// The bounds of schema contract v2: every one refused with SQLSTATE 22023 (invalid_parameter_value)
// and a message that names the field and the limit, with nothing changed; the value at the limit
// passes.
#include <QtTest>

#include "idem/database_error.hpp"
#include "test_database.hpp"

using namespace idem;

class TestBounds : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;

  std::string text(const std::string& sql) {
    pqxx::nontransaction tx(*conn_);
    const auto r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string("<null>") : std::string(r[0][0].c_str());
  }
  // Every row of every table, to show that a refused call changed nothing.
  std::string everything() {
    return text(
        "SELECT concat_ws('#', (SELECT string_agg(r::text, ',' ORDER BY idempotency_key) FROM "
        "idem.records r),"
        " (SELECT count(*) FROM idem.attempts), (SELECT count(*) FROM idem.transitions),"
        " (SELECT count(*) FROM idem.fund_flows), (SELECT count(*) FROM idem.retired_keys))");
  }
  // Runs sql expecting 22023 with a message containing `says`, and no change anywhere.
  void refused(const std::string& sql, const std::string& says) {
    const std::string before = everything();
    std::string sqlstate, message;
    try {
      translatingErrors("bound", [&] {
        pqxx::nontransaction tx(*conn_);
        tx.exec(sql);
      });
    } catch (const DatabaseError& e) {
      sqlstate = e.sqlstate();
      message = e.what();
    }
    QVERIFY2(sqlstate == "22023",
             (sql.substr(0, 120) + " gave '" + sqlstate + "': " + message).c_str());
    QVERIFY2(message.find(says) != std::string::npos, (message + " does not say: " + says).c_str());
    QCOMPARE(everything(), before);
  }
  void accepted(const std::string& sql) {
    pqxx::nontransaction tx(*conn_);
    tx.exec(sql);
  }
  static std::string begin(const std::string& key, const std::string& bizType,
                           const std::string& bizId, const std::string& tool,
                           const std::string& lease = "30 seconds") {
    return "SELECT * FROM idem.begin(" + key + ", " + bizType + ", " + bizId + ", " + tool +
           ", NULL, 'initial', '{}', interval '" + lease + "')";
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_bounds");
    conn_ = db_->connect();
    // A record for the decisions: UNKNOWN at version 2.
    accepted(
        "SELECT * FROM idem.begin('u', 'payment', 'ou', 'pay', NULL, 'initial', '{}', interval '1 "
        "millisecond')");
    QTest::qWait(5);
    accepted("SELECT idem.expire_leases()");
  }

  void bizTypeIsAShortLabel() {
    refused(begin("'k'", "''", "'o'", "'pay'"),
            "biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -");
    refused(begin("'k'", "NULL", "'o'", "'pay'"), "biz_type must be 1 to 64");
    refused(begin("'k'", "repeat('p', 65)", "'o'", "'pay'"), "got 65 characters");
    for (const char* bad :
         {"'pay ment'", "'pay/ment'", "'paymént'", "'pay\"ment'", "E'pay\\nment'", "'payment{}'"}) {
      refused(begin("'k'", bad, "'o'", "'pay'"), "biz_type must be 1 to 64 characters");
    }
    refused("SELECT * FROM idem.record_fund_flow('pay ment', 'o', 'DEBIT', 1, 'CNY', 'gw-1')",
            "biz_type must be 1 to 64");
    accepted(begin("'k64'", "repeat('p', 60) || '_.-9'", "'o64'", "'pay'"));
  }

  void toolIsAtMost128Characters() {
    refused(begin("'k'", "'payment'", "'o'", "''"), "tool must be 1 to 128 characters");
    refused(begin("'k'", "'payment'", "'o'", "E' \\t'"), "tool must be 1 to 128 characters");
    refused(begin("'k'", "'payment'", "'o'", "repeat('t', 129)"), "got 129 characters");
    accepted(begin("'kt'", "'payment'", "'ot'", "repeat('t', 128)"));
  }

  void bizIdIsAtMost255Characters() {
    refused(begin("'k'", "'payment'", "''", "'pay'"), "biz_id must be 1 to 255 characters");
    refused(begin("'k'", "'payment'", "E'\\u00a0'", "'pay'"), "biz_id must be 1 to 255 characters");
    refused(begin("'k'", "'payment'", "repeat('o', 256)", "'pay'"), "got 256 characters");
    refused(
        "SELECT * FROM idem.record_fund_flow('payment', repeat('o', 256), 'DEBIT', 1, 'CNY', "
        "'gw-1')",
        "biz_id must be 1 to 255");
    accepted(begin("'kb'", "'payment'", "repeat('o', 255)", "'pay'"));
  }

  // Stored and indexed, each is bounded with a clear 22023, not an index's internal error (above
  // about 2.7 kB) nor a 20 MB row.
  void requestHashAgentAndTraceIdsAreAtMost255Characters() {
    const std::string head = "SELECT * FROM idem.begin('kx', 'payment', 'ox', 'pay', ";
    refused(head + "repeat('h', 256), 'initial', '{}')", "request_hash must be at most 255");
    refused(head + "repeat('h', 20 * 1024 * 1024), 'initial', '{}')",
            "request_hash must be at most 255");
    refused(head + "NULL, 'initial', '{}', '30 s', repeat('a', 2800))",
            "agent_id must be at most 255 characters, got 2800");
    refused(head + "NULL, 'initial', '{}', '30 s', NULL, repeat('t', 3000))",
            "trace_id must be at most 255 characters, got 3000");
    accepted(head +
             "repeat('h', 255), 'initial', '{}', '30 s', repeat('a', 255), "
             "repeat('t', 255))");
  }

  // An amount a currency can hold: at most 10^15 - 1 minor units, so no two flows overflow a sum.
  void amountsAreBoundedToWhatACurrencyHolds() {
    const std::string head = "SELECT * FROM idem.record_fund_flow('payment', 'oa', 'DEBIT', ";
    refused(head + "9223372036854775807, 'CNY', 'gw-max')", "amount_minor must be 0 to");
    refused(head + "1000000000000000, 'CNY', 'gw-big')", "amount_minor must be 0 to");
    refused(head + "-1, 'CNY', 'gw-neg')", "amount_minor must be 0 to");
    accepted(head + "999999999999999, 'CNY', 'gw-ok')");
  }

  void leaseIsAtMost24Hours() {
    refused(begin("'k'", "'payment'", "'o'", "'pay'", "0 seconds"),
            "lease must be a positive interval of at most 24 hours");
    refused(begin("'k'", "'payment'", "'o'", "'pay'", "-1 seconds"), "at most 24 hours");
    refused(begin("'k'", "'payment'", "'o'", "'pay'", "24 hours 1 second"), "at most 24 hours");
    refused(begin("'k'", "'payment'", "'o'", "'pay'", "1000 years"), "at most 24 hours");
    accepted(begin("'kl'", "'payment'", "'ol'", "'pay'", "24 hours"));
  }

  // Blank: empty or whitespace of any kind, tabs, newlines and the Unicode spaces included.
  // A reason holds at least one visible letter or digit: not blank, and not made of characters
  // that only look like text to a blank check (braille blank, Hangul fillers, direction marks,
  // the soft hyphen, invisible operators) or of symbols alone.
  void reasonIsNotBlank() {
    for (const char* blank :
         {"''", "NULL", "'   '", "E'\\t\\n\\r\\f\\x0b'", "E'\\u00a0'", "E'\\u2003\\u2009'",
          "E'\\u200b\\u2060\\ufeff'", "E'\\u3000\\u205f\\u202f'", "E'\\u1680\\u180e\\u0085'",
          "E'\\u2028\\u2029'", "E'\\u2800\\u3164\\u200e\\u00ad\\u2061'", "E'\\u115f\\u1160\\uffa0'",
          "'---'", "'€€€'"}) {
      refused(std::string("SELECT * FROM idem.settle('u', 2, 'SUCCESS', ") + blank + ")",
              "settle needs a reason");
      refused(
          std::string("SELECT * FROM idem.resolve('u', 2, 'SUCCESS', ") + blank + ", '{\"e\": 1}')",
          "resolve needs a reason");
    }
  }

  void aReasonInAnyWrittenScriptIsAReason() {
    for (const char* reason :
         {"'网关确认未扣款'", "'Überweisung storniert'", "'返金済み'", "'환불 완료'", "'5'"}) {
      QCOMPARE(text(std::string("SELECT idem.has_visible_text(") + reason + ")::text"),
               std::string("true"));
    }
  }

  void reasonIsAtMost2000Characters() {
    refused("SELECT * FROM idem.settle('u', 2, 'SUCCESS', repeat('r', 2001))",
            "settle reason must be at most 2000 characters, got 2001");
    refused("SELECT * FROM idem.resolve('u', 2, 'SUCCESS', repeat('r', 2001), '{\"e\": 1}')",
            "resolve reason must be at most 2000 characters");
  }

  void evidenceIsAtMost64KiB() {
    // {"b": "xxx..."} is 9 bytes of JSON text around the string.
    refused(
        "SELECT * FROM idem.settle('u', 2, 'SUCCESS', 'r', jsonb_build_object('b', repeat('x', "
        "65536 - 8)))",
        "evidence must be at most 64 KiB (65536 bytes of JSON text), got 65537 bytes");
    refused(
        "SELECT * FROM idem.resolve('u', 2, 'SUCCESS', 'r', jsonb_build_object('b', repeat('x', "
        "65536 - 8)))",
        "resolve evidence must be at most 64 KiB");
    refused(
        "SELECT * FROM idem.settle('u', 2, 'SUCCESS', 'r', jsonb_build_object('b', repeat('x', "
        "10000000)))",
        "evidence must be at most 64 KiB");
    QCOMPARE(text("SELECT octet_length(jsonb_build_object('b', repeat('x', 65536 - 9))::text)"),
             std::string("65536"));
  }

  void resolveNeedsAnEvidenceObject() {
    for (const char* evidence : {"NULL", "'{}'", "'[]'", "'[1]'", "'\"text\"'", "'null'", "'42'"}) {
      refused(
          std::string("SELECT * FROM idem.resolve('u', 2, 'SUCCESS', 'lookup', ") + evidence + ")",
          "resolve needs evidence: a non-empty JSON object");
    }
  }

  void toStatusIsSuccessOrFailed() {
    for (const char* to : {"'PROCESSING'", "'UNKNOWN'", "NULL", "'success'"}) {
      refused(std::string("SELECT * FROM idem.settle('u', 2, ") + to + ", 'r')",
              "settle moves a record to SUCCESS or FAILED");
      refused(std::string("SELECT * FROM idem.resolve('u', 2, ") + to + ", 'r', '{\"e\": 1}')",
              "resolve moves a record to SUCCESS or FAILED");
    }
  }

  // At the limits a decision goes through.
  void atTheLimitsTheDecisionIsMade() {
    accepted(
        "SELECT * FROM idem.settle('u', 2, 'SUCCESS', 'a' || repeat('€', 1999), "
        "jsonb_build_object('b', "
        "repeat('x', 65536 - 9)))");
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key = 'u'"),
             std::string("SUCCESS"));
    QCOMPARE(text("SELECT char_length(reason) FROM idem.transitions WHERE idempotency_key = 'u' "
                  "AND actor_kind = 'operator'"),
             std::string("2000"));
  }
};

QTEST_GUILESS_MAIN(TestBounds)
#include "tst_bounds.moc"

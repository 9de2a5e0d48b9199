#include "demo_records.hpp"

#include <cstdio>
#include <map>
#include <pqxx/pqxx>
#include <random>

#include "idem/protocol_client.hpp"

namespace idem::bench {
namespace {

struct Seeder {
  ProtocolClient& client;
  std::mt19937& random;
  std::map<std::string, int> minutesAgo;  // key -> how far back to move it
  int count = 0;

  std::string hex(int digits) {
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < digits; ++i) out += kHex[random() % 16];
    return out;
  }

  BeginRequest request(const std::string& bizType, const std::string& bizId,
                       const std::string& tool, std::int64_t amount) {
    BeginRequest r;
    r.key = tool + ":" + bizId + ":" + hex(6);
    r.bizType = bizType;
    r.bizId = bizId;
    r.tool = tool;
    r.requestPayload = R"({"amount_minor": )" + std::to_string(amount) +
                       R"(, "currency": "CNY", "customer": "cus_)" + hex(8) +
                       R"(", "channel": "card"})";
    r.agentId = "checkout-agent-" + std::to_string(1 + random() % 4);
    r.traceId = hex(16);
    return r;
  }

  BeginResult again(BeginRequest r, TriggerSource source) {
    r.source = source;
    r.traceId = hex(16);
    return client.begin(r);
  }

  void place(const std::string& key, int minutes) {
    minutesAgo[key] = minutes;
    ++count;
  }
};

}  // namespace

DemoResult seedDemo(pqxx::connection& owner, const std::string& dsn) {
  // The agents write through their own role, operators decide under theirs: the history names them.
  pqxx::nontransaction(owner).exec(
      "DO $$ BEGIN "
      "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'checkout_agent') THEN CREATE ROLE "
      "checkout_agent LOGIN; END IF; "
      "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alice') THEN CREATE ROLE alice LOGIN; "
      "END IF; "
      "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bob') THEN CREATE ROLE bob LOGIN; END "
      "IF; END $$; "
      // The seeder also plays the gateway's webhook, whose ledger lines need idem_ledger.
      "GRANT idem_writer, idem_ledger TO checkout_agent; GRANT idem_operator TO alice, bob");
  pqxx::connection agent(dsn + " user=checkout_agent");
  std::mt19937 random(20240611);
  ProtocolClient client(agent);
  Seeder s{client, random, {}, 0};
  DemoResult out;
  auto minutes = [&](int lo, int hi) {
    return lo + static_cast<int>(random() % static_cast<unsigned>(hi - lo));
  };

  // The everyday: payments, coupons and refunds that completed, some after retries.
  for (int i = 0; i < 320; ++i) {
    const int kind = static_cast<int>(random() % 10);
    const std::string bizType = kind < 6 ? "payment" : kind < 8 ? "coupon" : "refund";
    const std::string prefix = kind < 6 ? "ord-" : kind < 8 ? "cpn-" : "rfd-";
    const std::string tool = kind < 6 ? "pay" : kind < 8 ? "issue_coupon" : "refund";
    const std::string bizId = prefix + std::to_string(48000 + i * 7);
    const std::int64_t amount = 990 + static_cast<std::int64_t>(random() % 50000);
    BeginRequest r = s.request(bizType, bizId, tool, amount);
    const std::string token = s.client.begin(r).claimToken.value_or("");
    const bool declined = random() % 12 == 0;
    if (declined) {
      if (random() % 2 == 0) {
        // Never sent (connection refused): a retryable failure, FAILED -> PROCESSING, run again.
        s.client.fail(r.key, 1, "connection refused before sending", token, true);
        const std::string again = s.again(r, TriggerSource::Framework).claimToken.value_or("");
        s.client.complete(
            r.key, 3, R"({"status": "captured", "gateway_ref": "gw-)" + s.hex(10) + "\"}", again);
      } else {
        // A definite business failure: final, a retry is replayed the error.
        s.client.fail(r.key, 1, "card declined: insufficient funds", token, false);
        if (random() % 2 == 0) s.again(r, TriggerSource::Framework);
      }
    } else {
      if (random() % 5 == 0) s.again(r, TriggerSource::Http);  // in_progress while it runs
      s.client.complete(r.key, 1,
                        R"({"status": "captured", "gateway_ref": "gw-)" + s.hex(10) + "\"}", token);
      if (random() % 4 == 0) s.again(r, TriggerSource::Llm);  // replayed
      if (random() % 9 == 0) s.again(r, TriggerSource::Callback);
    }
    if (bizType != "coupon") {
      const auto status =
          pqxx::nontransaction(owner)
              .exec_params1("SELECT status FROM idem.records WHERE idempotency_key = $1", r.key)[0]
              .as<std::string>();
      if (status == "SUCCESS") {
        s.client.recordFundFlow({bizType, bizId,
                                 bizType == "payment" ? FundFlowKind::Debit : FundFlowKind::Refund,
                                 amount, "CNY", "gw-" + s.hex(12), r.key});
      }
    }
    s.place(r.key, minutes(2, 360));
  }

  // The stuck ones: response timeouts (UNKNOWN), crashed agents (PROCESSING past the lease).
  for (int i = 0; i < 7; ++i) {
    const std::string bizId = "ord-" + std::to_string(51200 + i * 13);
    BeginRequest r = s.request("payment", bizId, "pay", 1990 + i * 1500);
    const std::string token = s.client.begin(r).claimToken.value_or("");
    s.client.markUnknown(r.key, 1,
                         i % 3 == 0 ? "gateway 504 after 10s" : "response timeout after 5s", token);
    s.again(r, TriggerSource::Llm);
    if (i == 2) {
      // The showcase: the gateway stopped answering; the HTTP client and a callback re-drove the
      // request (answered in_progress, never re-executed) and the ledger shows the DEBIT.
      out.showcase = r.key;
      s.again(r, TriggerSource::Http);
      s.again(r, TriggerSource::Callback);
    }
    if (i % 2 == 0) {
      s.client.recordFundFlow({"payment", bizId, FundFlowKind::Debit, 1990 + i * 1500, "CNY",
                               "gw-" + s.hex(12), r.key});
    }
    if (i == 4) {  // the double charge: a second DEBIT under another gateway reference
      s.client.recordFundFlow({"payment", bizId, FundFlowKind::Debit, 1990 + i * 1500, "CNY",
                               "gw-" + s.hex(12), r.key});
    }
    s.place(r.key, i == 2 ? 9 : i < 5 ? minutes(4, 40) : minutes(60, 300));
  }
  for (int i = 0; i < 4; ++i) {
    BeginRequest r = s.request(i == 3 ? "refund" : "payment",
                               (i == 3 ? "rfd-" : "ord-") + std::to_string(52300 + i * 11),
                               i == 3 ? "refund" : "pay", 4990 + i * 700);
    r.lease = std::chrono::milliseconds(1);  // the agent died: the lease runs out
    s.client.begin(r);
    s.place(r.key, i < 2 ? minutes(12, 30) : minutes(40, 200));
  }
  for (int i = 0; i < 3; ++i) {
    BeginRequest r =
        s.request("payment", "ord-" + std::to_string(52400 + i * 3), "pay", 2590 + i * 100);
    r.lease = std::chrono::minutes(30);  // in flight right now
    s.client.begin(r);
    s.place(r.key, minutes(0, 2));
  }

  // Decisions operators already made, under their own login roles.
  for (const char* who : {"alice", "bob"}) {
    pqxx::connection person(dsn + " user=" + who);
    ProtocolClient decide(person);
    for (int i = 0; i < 2; ++i) {
      BeginRequest r = s.request(
          "payment", std::string("ord-") + std::to_string(who[0] == 'a' ? 53000 + i : 53100 + i),
          "pay", 3990);
      const std::string token = s.client.begin(r).claimToken.value_or("");
      s.client.markUnknown(r.key, 1, "response timeout after 5s", token);
      const bool moved = i == 0;
      if (moved)
        s.client.recordFundFlow(
            {"payment", r.bizId, FundFlowKind::Debit, 3990, "CNY", "gw-" + s.hex(12), r.key});
      decide.settle(r.key, 2, moved ? RecordStatus::Success : RecordStatus::Failed,
                    moved ? "gateway console shows the capture; statement line matches"
                          : "gateway has no trace of the request; customer not charged",
                    std::string(R"({"gateway_ref": "gw-)") + s.hex(10) + R"(", "ticket": "OPS-)" +
                        std::to_string(300 + i) + "\"}");
      s.place(r.key, minutes(14, 120));
    }
  }

  // Spread everything over the last hours: each record, its history, its attempts and its flows
  // move back together, so every timeline stays consistent.
  pqxx::work tx(owner);
  tx.exec("CREATE TEMP TABLE demo_shift (key text PRIMARY KEY, back interval) ON COMMIT DROP");
  for (const auto& [key, back] : s.minutesAgo) {
    tx.exec_params(
        "INSERT INTO demo_shift VALUES ($1, $2 * interval '1 minute' + random() * interval '50 "
        "seconds')",
        key, back);
  }
  for (const char* table : {"records", "attempts", "transitions", "fund_flows"}) {
    tx.exec(std::string("ALTER TABLE idem.") + table + " DISABLE TRIGGER USER");
  }
  tx.exec(
      "UPDATE idem.records r SET created_at = r.created_at - s.back, updated_at = r.updated_at - "
      "s.back, "
      "lease_expires_at = r.lease_expires_at - s.back FROM demo_shift s WHERE s.key = "
      "r.idempotency_key");
  tx.exec(
      "UPDATE idem.attempts a SET created_at = a.created_at - s.back FROM demo_shift s WHERE s.key "
      "= a.idempotency_key");
  tx.exec(
      "UPDATE idem.transitions t SET created_at = t.created_at - s.back FROM demo_shift s WHERE "
      "s.key = t.idempotency_key");
  tx.exec(
      "UPDATE idem.fund_flows f SET created_at = f.created_at - s.back FROM demo_shift s WHERE "
      "s.key = f.idempotency_key");
  // A retry and a settle happen minutes after the first try, not in the same second.
  tx.exec(
      "UPDATE idem.transitions t SET created_at = t.created_at + (t.version - 1) * interval '35 "
      "seconds' "
      "WHERE t.version > 1");
  tx.exec(
      "UPDATE idem.attempts a SET created_at = a.created_at + n.k * interval '25 seconds' "
      "FROM (SELECT id, row_number() OVER (PARTITION BY idempotency_key ORDER BY id) - 1 AS k FROM "
      "idem.attempts) n "
      "WHERE n.id = a.id");
  tx.exec(
      "UPDATE idem.records r SET updated_at = greatest(r.updated_at, t.last) FROM "
      "(SELECT idempotency_key, max(created_at) AS last FROM idem.transitions GROUP BY 1) t "
      "WHERE t.idempotency_key = r.idempotency_key");
  for (const char* table : {"records", "attempts", "transitions", "fund_flows"}) {
    tx.exec(std::string("ALTER TABLE idem.") + table + " ENABLE TRIGGER USER");
  }
  tx.commit();
  out.records = s.count;
  return out;
}

}  // namespace idem::bench

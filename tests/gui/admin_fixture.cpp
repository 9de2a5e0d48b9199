#include "admin_fixture.hpp"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QTest>
#include <functional>
#include <nlohmann/json.hpp>

#include "models/database_session.hpp"
#include "models/record_table_model.hpp"

namespace idem::test {

BeginRequest paymentRequest(const std::string& key, const std::string& bizId,
                            std::chrono::milliseconds lease) {
  BeginRequest r;
  r.key = key;
  r.bizType = "payment";
  r.bizId = bizId;
  r.tool = "pay";
  r.requestPayload =
      nlohmann::json{{"amount_minor", 2990}, {"currency", "CNY"}, {"order", bizId}}.dump();
  r.lease = lease;
  r.agentId = "agent-7";
  r.traceId = "trace-" + key;
  return r;
}

Claim claim(ProtocolClient& client, const BeginRequest& request) {
  const BeginResult r = client.begin(request);
  if (r.outcome != Outcome::Executed || !r.claimToken || !r.version) {
    throw std::runtime_error("begin " + request.key + " was " + std::string(format(r.outcome)) +
                             ", not executed with a claim token");
  }
  return {request.key, *r.version, *r.claimToken};
}

AdminScenario seedScenario(pqxx::connection& connection) {
  ProtocolClient client(connection);
  AdminScenario s;
  s.processingFresh = "pay-fresh";
  s.freshToken = claim(client, paymentRequest(s.processingFresh, "ord-fresh")).token;

  s.processingExpired = "pay-expired";
  client.begin(paymentRequest(s.processingExpired, "ord-expired", std::chrono::milliseconds(1)));

  s.unknown = "pay-unknown";
  const Claim unknown = claim(client, paymentRequest(s.unknown, "ord-unknown"));
  client.markUnknown(s.unknown, unknown.version, "response timeout after 5s", unknown.token);
  auto retry = paymentRequest(s.unknown, "ord-unknown");
  retry.source = TriggerSource::Http;
  client.begin(retry);  // in_progress: a second attempt row

  s.unknownWithDebit = "pay-debited";
  const Claim debited = claim(client, paymentRequest(s.unknownWithDebit, "ord-debited"));
  client.markUnknown(s.unknownWithDebit, debited.version, "gateway timeout", debited.token);
  client.recordFundFlow({"payment", "ord-debited", FundFlowKind::Debit, 2990, "CNY", "gw-debit-1",
                         s.unknownWithDebit});

  s.unknownDoubleDebit = "pay-double";
  const Claim twice = claim(client, paymentRequest(s.unknownDoubleDebit, "ord-double"));
  client.markUnknown(s.unknownDoubleDebit, twice.version, "gateway timeout", twice.token);
  client.recordFundFlow({"payment", "ord-double", FundFlowKind::Debit, 2990, "CNY", "gw-double-1",
                         s.unknownDoubleDebit});
  client.recordFundFlow({"payment", "ord-double", FundFlowKind::Debit, 2990, "CNY", "gw-double-2",
                         s.unknownDoubleDebit});

  s.success = "pay-success";
  const Claim success = claim(client, paymentRequest(s.success, "ord-success"));
  client.complete(s.success, success.version, R"({"charged": true, "gateway_ref": "gw-ok-1"})",
                  success.token);
  client.recordFundFlow(
      {"payment", "ord-success", FundFlowKind::Debit, 2990, "CNY", "gw-ok-1", s.success});

  s.failed = "pay-failed";
  const Claim failed = claim(client, paymentRequest(s.failed, "ord-failed"));
  client.fail(s.failed, failed.version, "card declined", failed.token, /*retryAllowed=*/false);

  // The expired lease must be in the past for every test that follows.
  waitUntil([&] {
    pqxx::nontransaction tx(connection);
    return tx
        .exec_params1(
            "SELECT lease_expires_at < now() FROM idem.records WHERE idempotency_key = $1",
            s.processingExpired)[0]
        .as<bool>();
  });
  return s;
}

ConnectionSettings settingsFor(const std::string& dsn) {
  ConnectionSettings s = ConnectionSettings::resolve(dsn);
  s.source = "test";
  return s;
}

std::unique_ptr<admin::DatabaseSession> connectedSession(const std::string& dsn, int timeoutMs) {
  auto session = std::make_unique<admin::DatabaseSession>();
  session->open(settingsFor(dsn));
  waitUntil([&] { return session->isConnected(); }, timeoutMs);
  return session;
}

namespace {

void withoutRecordTriggers(const TestDatabase& db,
                           const std::function<void(pqxx::transaction_base&)>& write) {
  auto c = db.connect();
  pqxx::work tx(*c);
  tx.exec("ALTER TABLE idem.records DISABLE TRIGGER USER");
  write(tx);
  tx.exec("ALTER TABLE idem.records ENABLE TRIGGER USER");
  tx.commit();
}

}  // namespace

void execWithoutRecordTriggers(const TestDatabase& db, const std::string& sql) {
  withoutRecordTriggers(db, [&](pqxx::transaction_base& tx) { tx.exec(sql); });
}

void insertBulkRecords(const TestDatabase& db, const BulkRecords& r) {
  withoutRecordTriggers(db, [&](pqxx::transaction_base& tx) {
    tx.exec_params(R"SQL(
      INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status,
                                created_at, updated_at)
      SELECT $1 || CASE WHEN $7 > 0 THEN lpad(g::text, $7, '0') ELSE g::text END, $2, 'cp-' || g,
             $3, 'h', $4, now() - g * $6::interval, now() - g * $6::interval
        FROM generate_series(1, $5) AS g)SQL",
                   r.keyPrefix, r.bizType, r.tool, r.status, r.count, r.step, r.keyDigits);
  });
}

bool waitUntil(const std::function<bool()>& ready, int timeoutMs) {
  return QTest::qWaitFor(ready, timeoutMs);
}

bool loadEverything(admin::RecordTableModel& model, int timeoutMs) {
  const QDeadlineTimer deadline(timeoutMs);
  while (!deadline.hasExpired()) {
    if (!waitUntil([&] { return !model.isLoading(); },
                   static_cast<int>(deadline.remainingTime()))) {
      return false;
    }
    if (!model.lastError().isEmpty()) return false;
    if (!model.hasMore()) return true;
    model.fetchMore({});
  }
  return false;
}

std::vector<std::string> keysOf(const admin::RecordTableModel& model) {
  std::vector<std::string> out;
  for (int r = 0; r < model.rowCount(); ++r) out.push_back(model.recordAt(r)->idempotencyKey);
  return out;
}

std::vector<std::string> keysBySql(const TestDatabase& db, const std::string& sql) {
  auto c = db.connect();
  pqxx::nontransaction tx(*c);
  std::vector<std::string> out;
  for (const auto& row : tx.exec(sql)) out.emplace_back(row[0].c_str());
  return out;
}

std::string textBySql(const TestDatabase& db, const std::string& sql) {
  auto c = db.connect();
  pqxx::nontransaction tx(*c);
  const auto r = tx.exec(sql);
  return r.empty() || r[0][0].is_null() ? std::string("<null>") : std::string(r[0][0].c_str());
}

}  // namespace idem::test

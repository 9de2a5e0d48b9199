#include "idem/protocol_client.hpp"

#include <pqxx/connection>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"

namespace idem {
namespace {

// Statement names are global to a connection; the prefix keeps them apart from other users'.
constexpr const char* kBegin = "idem_protocol_begin";
constexpr const char* kComplete = "idem_protocol_complete";
constexpr const char* kFail = "idem_protocol_fail";
constexpr const char* kMarkUnknown = "idem_protocol_mark_unknown";
constexpr const char* kSettle = "idem_protocol_settle";
constexpr const char* kResolve = "idem_protocol_resolve";
constexpr const char* kReconcile = "idem_protocol_reconcile";
constexpr const char* kExpire = "idem_protocol_expire_leases";
constexpr const char* kFundFlow = "idem_protocol_record_fund_flow";

const char* orNull(const std::optional<std::string>& value) {
  return value ? value->c_str() : nullptr;
}

// An empty token is no token: the database answers not_claimant rather than a uuid syntax error.
const char* orNull(const std::string& token) {
  return token.empty() ? nullptr : token.c_str();
}

template <typename E>
std::optional<E> optionalEnum(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return parse<E>(field.c_str());
}

ChangeResult toChangeResult(const pqxx::row& row) {
  ChangeResult out;
  out.result = parse<ResultCode>(row[0].c_str());
  out.status = optionalEnum<RecordStatus>(row[1]);
  if (!row[2].is_null()) out.version = row[2].as<int>();
  return out;
}

}  // namespace

ProtocolClient::ProtocolClient(pqxx::connection& connection) : connection_(connection) {
  translatingErrors("prepare the protocol statements", [&] {
    connection_.prepare(
        kBegin,
        "SELECT outcome, status, version, response_payload, claim_token::text "
        "FROM idem.begin($1, $2, $3, $4, $5, $6, $7::jsonb, $8::interval, $9, $10)");
    connection_.prepare(kComplete,
                        "SELECT result, status, version FROM idem.complete("
                        "$1, $2, $3::jsonb, $4::uuid)");
    connection_.prepare(kFail,
                        "SELECT result, status, version FROM idem.fail("
                        "$1, $2, $3, $4::uuid, $5::boolean)");
    connection_.prepare(kMarkUnknown,
                        "SELECT result, status, version FROM idem.mark_unknown("
                        "$1, $2, $3, $4::uuid)");
    connection_.prepare(kSettle,
                        "SELECT result, status, version FROM idem.settle("
                        "$1, $2, $3, $4, $5::jsonb, $6::boolean)");
    connection_.prepare(kResolve,
                        "SELECT result, status, version FROM idem.resolve("
                        "$1, $2, $3, $4, $5::jsonb)");
    connection_.prepare(kReconcile, "SELECT idem.reconcile()");
    connection_.prepare(kExpire, "SELECT idem.expire_leases()");
    connection_.prepare(kFundFlow,
                        "SELECT flow_id, is_duplicate, already_recorded FROM idem.record_fund_flow("
                        "$1, $2, $3, $4, $5, $6, $7)");
  });
}

BeginResult ProtocolClient::begin(const BeginRequest& request) {
  return translatingErrors("begin", [&] {
    pqxx::nontransaction tx(connection_);
    const std::string lease = std::to_string(request.lease.count()) + " milliseconds";
    const pqxx::row row = tx.exec_prepared1(
        kBegin, request.key, request.bizType, request.bizId, request.tool,
        orNull(request.requestHash), std::string(format(request.source)), request.requestPayload,
        lease, orNull(request.agentId), orNull(request.traceId));
    BeginResult out;
    out.outcome = parse<Outcome>(row[0].c_str());
    out.status = optionalEnum<RecordStatus>(row[1]);
    if (!row[2].is_null()) out.version = row[2].as<int>();
    if (!row[3].is_null()) out.responsePayload = row[3].c_str();
    if (!row[4].is_null()) out.claimToken = row[4].c_str();
    return out;
  });
}

ChangeResult ProtocolClient::complete(const std::string& key, int expectedVersion,
                                      const std::string& responsePayload,
                                      const std::string& token) {
  return translatingErrors("complete", [&] {
    pqxx::nontransaction tx(connection_);
    return toChangeResult(
        tx.exec_prepared1(kComplete, key, expectedVersion, responsePayload, orNull(token)));
  });
}

ChangeResult ProtocolClient::fail(const std::string& key, int expectedVersion,
                                  const std::string& error, const std::string& token,
                                  bool retryAllowed) {
  return translatingErrors("fail", [&] {
    pqxx::nontransaction tx(connection_);
    return toChangeResult(
        tx.exec_prepared1(kFail, key, expectedVersion, error, orNull(token), retryAllowed));
  });
}

ChangeResult ProtocolClient::markUnknown(const std::string& key, int expectedVersion,
                                         const std::string& reason, const std::string& token) {
  return translatingErrors("mark_unknown", [&] {
    pqxx::nontransaction tx(connection_);
    return toChangeResult(
        tx.exec_prepared1(kMarkUnknown, key, expectedVersion, reason, orNull(token)));
  });
}

ChangeResult ProtocolClient::settle(const std::string& key, int expectedVersion, RecordStatus to,
                                    const std::string& reason,
                                    const std::optional<std::string>& evidence,
                                    bool overrideMoneyMoved) {
  return translatingErrors("settle", [&] {
    pqxx::nontransaction tx(connection_);
    return toChangeResult(tx.exec_prepared1(kSettle, key, expectedVersion, std::string(format(to)),
                                            reason, orNull(evidence), overrideMoneyMoved));
  });
}

ChangeResult ProtocolClient::resolve(const std::string& key, int expectedVersion, RecordStatus to,
                                     const std::string& reason, const std::string& evidence) {
  return translatingErrors("resolve", [&] {
    pqxx::nontransaction tx(connection_);
    return toChangeResult(tx.exec_prepared1(kResolve, key, expectedVersion, std::string(format(to)),
                                            reason, evidence));
  });
}

int ProtocolClient::reconcile() {
  return translatingErrors("reconcile", [&] {
    pqxx::nontransaction tx(connection_);
    return tx.exec_prepared1(kReconcile)[0].as<int>();
  });
}

int ProtocolClient::expireLeases() {
  return translatingErrors("expire_leases", [&] {
    pqxx::nontransaction tx(connection_);
    return tx.exec_prepared1(kExpire)[0].as<int>();
  });
}

FundFlowResult ProtocolClient::recordFundFlow(const FundFlowInput& flow) {
  return translatingErrors("record_fund_flow", [&] {
    pqxx::nontransaction tx(connection_);
    const pqxx::row row = tx.exec_prepared1(
        kFundFlow, flow.bizType, flow.bizId, std::string(format(flow.kind)), flow.amountMinor,
        flow.currency, flow.externalRef, orNull(flow.idempotencyKey));
    FundFlowResult out;
    out.flowId = row[0].as<std::int64_t>();
    out.isDuplicate = row[1].as<bool>();
    out.alreadyRecorded = row[2].as<bool>();
    return out;
  });
}

}  // namespace idem

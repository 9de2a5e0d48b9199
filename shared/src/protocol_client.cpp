#include "idem/protocol_client.hpp"

#include <pqxx/connection>
#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"

namespace idem {
namespace {

// Unnamed statements, not prepared ones: a prepared statement is session state, and behind
// PgBouncer in transaction mode the next call may run on another server connection, where it does
// not exist. Planning these one-function calls costs next to nothing.
constexpr const char* kBegin =
    "SELECT outcome, status, version, response_payload, claim_token::text "
    "FROM idem.begin($1, $2, $3, $4, $5, $6, $7::jsonb, $8::interval, $9, $10)";
constexpr const char* kComplete =
    "SELECT result, status, version FROM idem.complete($1, $2, $3::jsonb, $4::uuid)";
constexpr const char* kFail =
    "SELECT result, status, version FROM idem.fail($1, $2, $3, $4::uuid, $5::boolean)";
constexpr const char* kMarkUnknown =
    "SELECT result, status, version FROM idem.mark_unknown($1, $2, $3, $4::uuid)";
constexpr const char* kSettle =
    "SELECT result, status, version FROM idem.settle($1, $2, $3, $4, $5::jsonb, $6::boolean)";
constexpr const char* kResolve =
    "SELECT result, status, version FROM idem.resolve($1, $2, $3, $4, $5::jsonb)";
constexpr const char* kReconcile = "SELECT idem.reconcile()";
constexpr const char* kExpire = "SELECT idem.expire_leases()";
constexpr const char* kFundFlow =
    "SELECT flow_id, is_duplicate, already_recorded FROM idem.record_fund_flow("
    "$1, $2, $3, $4, $5, $6, $7)";

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

ProtocolClient::ProtocolClient(pqxx::connection& connection) : connection_(connection) {}

// Each call is one statement under the calling thread's statement timeout.
template <typename Call>
auto ProtocolClient::call(const char* what, Call&& body) {
  return translatingErrors(what, [&] { return boundedCall(connection_, body); });
}

BeginResult ProtocolClient::begin(const BeginRequest& request) {
  return call("begin", [&](pqxx::transaction_base& tx) {
    const std::string lease = std::to_string(request.lease.count()) + " milliseconds";
    const pqxx::row row = tx.exec_params1(
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
  return call("complete", [&](pqxx::transaction_base& tx) {
    return toChangeResult(
        tx.exec_params1(kComplete, key, expectedVersion, responsePayload, orNull(token)));
  });
}

ChangeResult ProtocolClient::fail(const std::string& key, int expectedVersion,
                                  const std::string& error, const std::string& token,
                                  bool retryAllowed) {
  return call("fail", [&](pqxx::transaction_base& tx) {
    return toChangeResult(
        tx.exec_params1(kFail, key, expectedVersion, error, orNull(token), retryAllowed));
  });
}

ChangeResult ProtocolClient::markUnknown(const std::string& key, int expectedVersion,
                                         const std::string& reason, const std::string& token) {
  return call("mark_unknown", [&](pqxx::transaction_base& tx) {
    return toChangeResult(
        tx.exec_params1(kMarkUnknown, key, expectedVersion, reason, orNull(token)));
  });
}

ChangeResult ProtocolClient::settle(const std::string& key, int expectedVersion, RecordStatus to,
                                    const std::string& reason,
                                    const std::optional<std::string>& evidence,
                                    bool overrideMoneyMoved) {
  return call("settle", [&](pqxx::transaction_base& tx) {
    return toChangeResult(tx.exec_params1(kSettle, key, expectedVersion, std::string(format(to)),
                                          reason, orNull(evidence), overrideMoneyMoved));
  });
}

ChangeResult ProtocolClient::resolve(const std::string& key, int expectedVersion, RecordStatus to,
                                     const std::string& reason, const std::string& evidence) {
  return call("resolve", [&](pqxx::transaction_base& tx) {
    return toChangeResult(
        tx.exec_params1(kResolve, key, expectedVersion, std::string(format(to)), reason, evidence));
  });
}

int ProtocolClient::reconcile() {
  return call("reconcile",
              [&](pqxx::transaction_base& tx) { return tx.exec_params1(kReconcile)[0].as<int>(); });
}

int ProtocolClient::expireLeases() {
  return call("expire_leases",
              [&](pqxx::transaction_base& tx) { return tx.exec_params1(kExpire)[0].as<int>(); });
}

FundFlowResult ProtocolClient::recordFundFlow(const FundFlowInput& flow) {
  return call("record_fund_flow", [&](pqxx::transaction_base& tx) {
    const pqxx::row row = tx.exec_params1(
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

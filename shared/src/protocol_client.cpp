#include "idem/protocol_client.hpp"

#include <cinttypes>
#include <cstdio>
#include <pqxx/connection>
#include <pqxx/pqxx>
#include <string_view>
#include <thread>

#include "idem/bounded_transaction.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/serialization_retry.hpp"

namespace idem {
namespace {

// The statements. begin, complete, fail and mark_unknown, a claim's round trip, go as prepared
// statements while the session keeps them (see ProtocolClient::send); the rest as unnamed ones.
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
constexpr const char* kPurge =
    "SELECT records_deleted, attempts_deleted, transitions_deleted, tombstones_written FROM "
    "idem.purge($1::interval)";
constexpr const char* kPurgeRecords =
    "SELECT records_deleted, tombstones_written, next_from::text FROM "
    "idem.purge_records($1::interval, $2::integer, $3::timestamptz)";
constexpr const char* kPurgeHistory =
    "SELECT attempts_deleted, transitions_deleted FROM idem.purge_history($1::interval)";
// The gateway's word (idem_ledger) and the claimant's (idem_writer, with its claim token).
constexpr const char* kLedgerFlow =
    "SELECT flow_id, is_duplicate, already_recorded FROM idem.record_fund_flow("
    "$1, $2, $3, $4, $5, $6, $7)";
constexpr const char* kClaimantFlow =
    "SELECT flow_id, is_duplicate, already_recorded FROM idem.record_fund_flow("
    "$1, $2, $3, $4, $5, $6, $7, $8::uuid)";

const char* orNull(const std::optional<std::string>& value) {
  return value ? value->c_str() : nullptr;
}

// An empty token is no token: the database answers not_claimant rather than a uuid syntax error.
const char* orNull(const std::string& token) {
  return token.empty() ? nullptr : token.c_str();
}

template <typename E>
std::optional<E> optionalEnum(const char* text) {
  if (text == nullptr) return std::nullopt;
  return parse<E>(text);
}

// An empty token is no token, as in orNull.
std::optional<std::string> tokenOrNull(const std::string& token) {
  if (token.empty()) return std::nullopt;
  return token;
}

ChangeResult toChangeResult(const pqxx::row& row) {
  return readChangeRow([&row](int i) { return row[i].is_null() ? nullptr : row[i].c_str(); });
}

// Sends one statement, prepared under `preparedName` or else unnamed, and reads its one row.
template <typename Read>
auto execStatement(pqxx::transaction_base& tx, const ProtocolStatement& statement,
                   const std::string* preparedName, Read read) {
  std::vector<const char*> values;
  values.reserve(statement.parameters.size());
  for (const auto& p : statement.parameters) values.push_back(p ? p->c_str() : nullptr);
  const pqxx::row row =
      preparedName != nullptr
          ? tx.exec_prepared1(*preparedName, pqxx::prepare::make_dynamic_params(values))
          : tx.exec_params1(statement.sql, pqxx::prepare::make_dynamic_params(values));
  return read([&row](int i) { return row[i].is_null() ? nullptr : row[i].c_str(); });
}

// Retention's calls, in a transaction at READ COMMITTED whatever the login's or database's
// default: retention rests on locks, not on a snapshot, and at SERIALIZABLE its reads of every
// record made the claims committing beside it fail to serialize until it ended.
template <typename Call>
auto atReadCommitted(pqxx::connection& connection, Call&& body) {
  Work tx(connection);
  tx.exec("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
  auto out = std::forward<Call>(body)(static_cast<pqxx::transaction_base&>(tx));
  tx.commit();
  return out;
}

}  // namespace

// A prepared statement's name: the call's and a hash of the statement's text (FNV-1a), so that on
// a server connection a pooler shares, a name always means the same text, whichever client or
// version of this library prepared it there.
std::string preparedName(const ProtocolStatement& statement) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char* c = statement.sql; *c != '\0'; ++c) {
    hash ^= static_cast<unsigned char>(*c);
    hash *= 1099511628211ULL;
  }
  char name[64];
  std::snprintf(name, sizeof name, "idem_%s_%016" PRIx64, statement.what, hash);
  return name;
}

bool preparedStatementLost(const DatabaseError& error) {
  const std::string& state = error.sqlstate();
  if (state == "26000" || state == "42P05") return true;
  if (state != "0A000") return false;
  // A stale plan: by the server's routine, in whatever language the server speaks (libpq callers,
  // the proxy), else by PostgreSQL's English words (libpqxx passes no routine on).
  return error.routine() == "RevalidateCachedQuery" ||
         std::string_view(error.what()).find("cached plan must not change result type") !=
             std::string_view::npos;
}

bool runsAgainUnnamed(const DatabaseError& error) {
  return preparedStatementLost(error) || (error.sqlstate() == "0A000" && error.routine().empty());
}

const std::vector<ProtocolStatement>& claimStatements() {
  static const std::vector<ProtocolStatement> statements{{"begin", kBegin, {}},
                                                         {"complete", kComplete, {}},
                                                         {"fail", kFail, {}},
                                                         {"mark_unknown", kMarkUnknown, {}}};
  return statements;
}

ProtocolClient::ProtocolClient(pqxx::connection& connection, Statements statements)
    : connection_(connection), prepared_(statements == Statements::Prepared) {}

template <typename Read>
auto ProtocolClient::send(pqxx::transaction_base& tx, const ProtocolStatement& statement,
                          Read read) {
  if (prepared_ && !sessionChecked_) {
    // Behind a pooler the session is shared and keeps nothing: unnamed from the start.
    sessionChecked_ = true;
    prepared_ = !sessionIsShared(tx);
  }
  if (!prepared_) return execStatement(tx, statement, nullptr, read);
  const std::string name = preparedName(statement);
  connection_.prepare(name, statement.sql);  // defined once a connection; prepared at first use
  return execStatement(tx, statement, &name, read);
}

// Each call is one statement under the calling thread's statement timeout. A call that ended in a
// serialization failure or a deadlock changed nothing: it runs again in a new transaction, whose
// snapshot then gives the contract's answer. That is what REPEATABLE READ and SERIALIZABLE ask of
// every client (a login or database may default to them); at READ COMMITTED it only happens when
// begin's own rounds ran out under contention.
template <typename Call>
auto ProtocolClient::call(const char* what, Call&& body, Isolation isolation) {
  for (int attempt = 1;; ++attempt) {
    try {
      return translatingErrors(what, [&] {
        return isolation == Isolation::ReadCommitted ? atReadCommitted(connection_, body)
                                                     : boundedCall(connection_, body);
      });
    } catch (const DatabaseError& e) {
      if (prepared_ && runsAgainUnnamed(e)) {
        // Nothing ran (the call's own transaction was rolled back). The session does not keep
        // prepared statements as they were (a pooler in transaction mode, or a plan a migration
        // made stale): from now on this client sends unnamed ones, which need no session state.
        prepared_ = false;
        --attempt;
        continue;
      }
      if (!runsAgain(e.sqlstate()) || attempt == kSerializationRetries) throw;
      std::this_thread::sleep_for(pauseBeforeRetry(attempt));
    }
  }
}

ProtocolStatement beginStatement(const BeginRequest& request) {
  return {
      "begin",
      kBegin,
      {request.key, request.bizType, request.bizId, request.tool, request.requestHash,
       std::string(format(request.source)), request.requestPayload,
       std::to_string(request.lease.count()) + " milliseconds", request.agentId, request.traceId}};
}

ProtocolStatement completeStatement(const Claim& claim, const std::string& responsePayload) {
  return {"complete",
          kComplete,
          {claim.key, std::to_string(claim.version), responsePayload, tokenOrNull(claim.token)}};
}

ProtocolStatement failStatement(const Claim& claim, const std::string& error, bool retryAllowed) {
  return {"fail",
          kFail,
          {claim.key, std::to_string(claim.version), error, tokenOrNull(claim.token),
           std::string(retryAllowed ? "true" : "false")}};
}

ProtocolStatement markUnknownStatement(const Claim& claim, const std::string& reason) {
  return {"mark_unknown",
          kMarkUnknown,
          {claim.key, std::to_string(claim.version), reason, tokenOrNull(claim.token)}};
}

BeginResult readBeginRow(const FieldText& field) {
  BeginResult out;
  out.outcome = parse<Outcome>(field(0));
  out.status = optionalEnum<RecordStatus>(field(1));
  if (field(2) != nullptr) out.version = std::stoi(field(2));
  if (field(3) != nullptr) out.responsePayload = field(3);
  if (field(4) != nullptr) out.claimToken = field(4);
  return out;
}

ChangeResult readChangeRow(const FieldText& field) {
  ChangeResult out;
  out.result = parse<ResultCode>(field(0));
  out.status = optionalEnum<RecordStatus>(field(1));
  if (field(2) != nullptr) out.version = std::stoi(field(2));
  return out;
}

BeginResult ProtocolClient::begin(const BeginRequest& request) {
  return call("begin", [&](pqxx::transaction_base& tx) {
    return send(tx, beginStatement(request), readBeginRow);
  });
}

ChangeResult ProtocolClient::complete(const std::string& key, int expectedVersion,
                                      const std::string& responsePayload,
                                      const std::string& token) {
  return call("complete", [&](pqxx::transaction_base& tx) {
    return send(tx, completeStatement({key, expectedVersion, token}, responsePayload),
                readChangeRow);
  });
}

ChangeResult ProtocolClient::fail(const std::string& key, int expectedVersion,
                                  const std::string& error, const std::string& token,
                                  bool retryAllowed) {
  return call("fail", [&](pqxx::transaction_base& tx) {
    return send(tx, failStatement({key, expectedVersion, token}, error, retryAllowed),
                readChangeRow);
  });
}

ChangeResult ProtocolClient::markUnknown(const std::string& key, int expectedVersion,
                                         const std::string& reason, const std::string& token) {
  return call("mark_unknown", [&](pqxx::transaction_base& tx) {
    return send(tx, markUnknownStatement({key, expectedVersion, token}, reason), readChangeRow);
  });
}

ChangeResult ProtocolClient::settle(const std::string& key, int expectedVersion, RecordStatus to,
                                    const std::string& reason,
                                    const std::optional<std::string>& evidence,
                                    bool overrideSideEffect) {
  return call("settle", [&](pqxx::transaction_base& tx) {
    return toChangeResult(tx.exec_params1(kSettle, key, expectedVersion, std::string(format(to)),
                                          reason, orNull(evidence), overrideSideEffect));
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

namespace {

std::string intervalText(std::chrono::milliseconds age) {
  return std::to_string(age.count()) + " milliseconds";
}

}  // namespace

PurgeResult ProtocolClient::purge(std::chrono::milliseconds age) {
  return call(
      "purge",
      [&](pqxx::transaction_base& tx) {
        const pqxx::row r = tx.exec_params1(kPurge, intervalText(age));
        PurgeResult out;
        out.records = r[0].as<std::int64_t>();
        out.attempts = r[1].as<std::int64_t>();
        out.transitions = r[2].as<std::int64_t>();
        out.tombstones = r[3].as<std::int64_t>();
        return out;
      },
      Isolation::ReadCommitted);
}

PurgeResult ProtocolClient::purgeRecords(std::chrono::milliseconds age, int limit,
                                         const std::optional<std::string>& from) {
  return call(
      "purge_records",
      [&](pqxx::transaction_base& tx) {
        const pqxx::row r = tx.exec_params1(kPurgeRecords, intervalText(age), limit, orNull(from));
        PurgeResult out;
        out.records = r[0].as<std::int64_t>();
        out.tombstones = r[1].as<std::int64_t>();
        if (!r[2].is_null()) out.nextFrom = r[2].c_str();
        return out;
      },
      Isolation::ReadCommitted);
}

PurgeResult ProtocolClient::purgeHistory(std::chrono::milliseconds age) {
  return call(
      "purge_history",
      [&](pqxx::transaction_base& tx) {
        const pqxx::row r = tx.exec_params1(kPurgeHistory, intervalText(age));
        PurgeResult out;
        out.attempts = r[0].as<std::int64_t>();
        out.transitions = r[1].as<std::int64_t>();
        return out;
      },
      Isolation::ReadCommitted);
}

namespace {

FundFlowResult toFundFlowResult(const pqxx::row& row) {
  FundFlowResult out;
  out.flowId = row[0].as<std::int64_t>();
  out.isDuplicate = row[1].as<bool>();
  out.alreadyRecorded = row[2].as<bool>();
  return out;
}

}  // namespace

FundFlowResult ProtocolClient::recordFundFlow(const FundFlowInput& flow) {
  return call("record_fund_flow", [&](pqxx::transaction_base& tx) {
    return toFundFlowResult(tx.exec_params1(
        kLedgerFlow, flow.bizType, flow.bizId, std::string(format(flow.kind)), flow.amountMinor,
        flow.currency, flow.externalRef, orNull(flow.idempotencyKey)));
  });
}

FundFlowResult ProtocolClient::recordFundFlow(const FundFlowInput& flow, const std::string& token) {
  return call("record_fund_flow", [&](pqxx::transaction_base& tx) {
    return toFundFlowResult(tx.exec_params1(
        kClaimantFlow, flow.bizType, flow.bizId, std::string(format(flow.kind)), flow.amountMinor,
        flow.currency, flow.externalRef, orNull(flow.idempotencyKey), orNull(token)));
  });
}

}  // namespace idem

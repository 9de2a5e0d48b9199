// A typed client for the protocol functions of the idem schema (docs/contract/schema.md, version
// 3). One instance per connection; each call is one autocommit statement, as the protocol requires:
// begin must commit before the caller goes downstream, complete after it comes back.
//
// Only the claimant may report the outcome: `begin` hands the caller that got `executed` a claim
// token, and complete / fail / markUnknown must present it (else `not_claimant`, nothing changes).
//
// At any isolation level: a call that ends in a serialization failure (40001) or a deadlock
// (40P01) changed nothing, and is run again in a new transaction, up to kSerializationRetries
// times, as REPEATABLE READ and SERIALIZABLE ask of their clients.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/database_error.hpp"
#include "idem/domain.hpp"
#include "idem/vocabulary.hpp"

namespace idem {

struct BeginRequest {
  std::string key;
  std::string bizType;
  std::string bizId;
  std::string tool;
  // Empty: the database hashes the payload (SHA-256 of its jsonb text).
  std::optional<std::string> requestHash;
  TriggerSource source = TriggerSource::Initial;
  std::string requestPayload = "{}";  // JSON text
  std::chrono::milliseconds lease{30'000};
  std::optional<std::string> agentId;
  std::optional<std::string> traceId;
};

struct BeginResult {
  Outcome outcome = Outcome::Executed;
  std::optional<RecordStatus> status;  // the key's record; empty when rejected
  std::optional<int> version;
  std::optional<std::string> responsePayload;  // set when replayed (SUCCESS)
  // Only for `executed`: the token that proves this caller is the claimant. Keep it with the
  // version; it is never stored by the database (only its hash is).
  std::optional<std::string> claimToken;
};

// What the claimant holds after `executed`: everything complete / fail / markUnknown need.
struct Claim {
  std::string key;
  int version = 0;
  std::string token;
};

struct ChangeResult {
  ResultCode result = ResultCode::NotFound;
  std::optional<RecordStatus> status;  // after the call, or the current one when refused
  std::optional<int> version;

  bool ok() const { return result == ResultCode::Ok; }
};

struct FundFlowResult {
  std::int64_t flowId = 0;
  bool isDuplicate = false;      // a different external_ref for an object and kind that had a flow
  bool alreadyRecorded = false;  // the same external_ref again: nothing was written
};

// How many times a call is run when it keeps failing with 40001 or 40P01.
inline constexpr int kSerializationRetries = 8;

// What retention removed (idem.purge).
struct PurgeResult {
  std::int64_t records = 0;
  std::int64_t attempts = 0;
  std::int64_t transitions = 0;
  std::int64_t tombstones = 0;
  // A batch of records (purgeRecords): where the next batch starts, the newest updated_at it
  // removed, as PostgreSQL prints a timestamptz; none when it removed nothing.
  std::optional<std::string> nextFrom;
};

// The claimant's calls as text, for a caller that speaks libpq itself (the proxy's sessions on its
// own event loop): the statement, its parameters as text (nullopt: NULL), and how to read the one
// row it answers. ProtocolClient sends the very same statements.
struct ProtocolStatement {
  const char* what;  // the function's name, for error messages
  const char* sql;
  std::vector<std::optional<std::string>> parameters;
};

ProtocolStatement beginStatement(const BeginRequest& request);
ProtocolStatement completeStatement(const Claim& claim, const std::string& responsePayload);
ProtocolStatement failStatement(const Claim& claim, const std::string& error, bool retryAllowed);
ProtocolStatement markUnknownStatement(const Claim& claim, const std::string& reason);

// The name a session prepares a claim's statement under (see ProtocolClient::Statements), and the
// four statements of a claim's round trip without parameters, for a session to prepare when it
// opens.
std::string preparedName(const ProtocolStatement& statement);
const std::vector<ProtocolStatement>& claimStatements();
// The server's word that a prepared statement is not there as the session left it: it does not
// exist (a pooler in transaction mode sent the call to another server connection, or ran DISCARD
// ALL), another session's statement holds its name (a pooler's shared server connection), or its
// plan changed its result type (a migration replaced the function; known by the server's routine
// where the error carries it, else by its English message). The statement did not run.
bool preparedStatementLost(const DatabaseError& error);
// What makes a claim's call that went prepared run again unnamed, once: the server's word that
// the statement was lost, and also any 0A000 without the server's routine (libpqxx passes none
// on), which may be a stale plan in a language other than English. The call ran in a transaction
// of its own that the error rolled back, so running it again repeats nothing; an error that was
// not a lost statement comes back from the unnamed run.
bool runsAgainUnnamed(const DatabaseError& error);

// A field of the answered row by its index: its text, or nullptr when NULL.
using FieldText = std::function<const char*(int)>;
BeginResult readBeginRow(const FieldText& field);
// The row of complete, fail, mark_unknown, settle and resolve.
ChangeResult readChangeRow(const FieldText& field);

class ProtocolClient {
 public:
  // How a claim's round trip (begin, complete, fail, mark_unknown) reaches the server. Prepared:
  // as prepared statements, planned once a session, unless the session is shared (a pooler
  // stands in between, sessionIsShared, asked at the first such call) or until the server shows
  // that it did not keep them (a DISCARD ALL, a pooler that passes the server's pid on); then as
  // unnamed ones, and the call that found out runs again, since the server ran nothing of it.
  // Unnamed: parsed and planned every call, no session state at all. Every other call is an
  // unnamed statement either way.
  enum class Statements { Prepared, Unnamed };

  // The connection must outlive the client and must not be used by another thread meanwhile.
  explicit ProtocolClient(pqxx::connection& connection,
                          Statements statements = Statements::Prepared);

  BeginResult begin(const BeginRequest& request);
  // The claimant's answers. `token` is the claim token begin returned with `executed`.
  ChangeResult complete(const std::string& key, int expectedVersion,
                        const std::string& responsePayload, const std::string& token);
  // retryAllowed=false: a definite business failure (card declined): a retry is `replayed` with
  // the error, never run again. true: the request certainly never reached downstream.
  ChangeResult fail(const std::string& key, int expectedVersion, const std::string& error,
                    const std::string& token, bool retryAllowed = false);
  ChangeResult markUnknown(const std::string& key, int expectedVersion, const std::string& reason,
                           const std::string& token);
  // The operator's settle; see settlement.hpp for the checked path people use.
  ChangeResult settle(const std::string& key, int expectedVersion, RecordStatus to,
                      const std::string& reason, const std::optional<std::string>& evidence,
                      bool overrideSideEffect = false);
  // The reconciler's decision from evidence (a JSON object, required).
  ChangeResult resolve(const std::string& key, int expectedVersion, RecordStatus to,
                       const std::string& reason, const std::string& evidence);
  // Resolves to SUCCESS every stuck record whose own key has a flow of one of its business
  // type's effect kinds.
  int reconcile();
  int expireLeases();
  // Retention, as the schema's owner: SUCCESS and FAILED records older than `age` go, each leaving
  // its tombstone.
  PurgeResult purge(std::chrono::milliseconds age);
  // The same in parts, each a transaction of its own: at most `limit` of the oldest such records
  // (writers' held rows skipped) from `from` on (the previous batch's nextFrom), and then the
  // history's day partitions past the age.
  PurgeResult purgeRecords(std::chrono::milliseconds age, int limit,
                           const std::optional<std::string>& from = std::nullopt);
  PurgeResult purgeHistory(std::chrono::milliseconds age);
  // The gateway's word on the ledger (a callback, a statement line, a status lookup): a login
  // granted idem_ledger.
  FundFlowResult recordFundFlow(const FundFlowInput& flow);
  // The claimant's word: its own side effect, under flow.idempotencyKey, with the claim token begin
  // returned (a login granted idem_writer). A wrong token is refused with an error (42501).
  FundFlowResult recordFundFlow(const FundFlowInput& flow, const std::string& token);

 private:
  enum class Isolation { Default, ReadCommitted };
  template <typename Call>
  auto call(const char* what, Call&& body, Isolation isolation = Isolation::Default);
  template <typename Read>
  auto send(pqxx::transaction_base& tx, const ProtocolStatement& statement, Read read);

  pqxx::connection& connection_;
  bool prepared_;
  bool sessionChecked_ = false;
};

}  // namespace idem

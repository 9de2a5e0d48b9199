// The operator's settle, checked: the one code path behind the admin app's Settle dialog and
// `idemctl settle`. It validates the input, shows the evidence (fund flows of the business object,
// and whether the ledger records the record's side effect as the database decides it:
// idem.side_effect_of, the same rule idem.settle enforces, never a second copy in C++), settles
// with the version the operator saw, and turns each refusal of the server into a verdict with a
// sentence: lease_active with when the lease ends, side_effect_recorded with the flows, conflict
// with what changed since and by whom.
#pragma once

#include <chrono>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "idem/protocol_client.hpp"

namespace idem {

struct SettleRequest {
  std::string key;
  // The version the operator saw. Empty: the record's current version (a scripted runbook that
  // read nothing first); the admin app always passes it.
  std::optional<int> expectedVersion;
  RecordStatus to = RecordStatus::Failed;
  std::string reason;
  std::optional<std::string> evidence;  // JSON text
  // Settle FAILED although the ledger records the side effect (the server's side_effect_recorded
  // rule); the transition's evidence records the override. Needs a reason like any settle.
  bool overrideSideEffect = false;
};

// What the evidence says about a decision, before it is made.
struct SettleAssessment {
  std::optional<Record> record;
  std::vector<FundFlow> flows;
  // As the database decides it (idem.side_effect_of): a flow of one of the business type's
  // effect kinds under the record's key, or for its business object beyond the reversals.
  bool sideEffectRecorded = false;
  // Does the business type's side effect leave a line in the ledger at all? false (a coupon):
  // the ledger cannot tell, and FAILED is the operator's word that it did not happen.
  bool ledgerCanTell = true;
  bool typeDeclared = true;  // idem.business_types names the type; else read cautiously
  std::vector<FundFlowKind> effectKinds;    // what proves the side effect, per the type
  std::vector<FundFlowKind> reversalKinds;  // what gives it back (a payment's REFUND)
  std::string typeDescription;
  bool duplicateDebit = false;  // more than one DEBIT: the customer was already charged twice
  // A PROCESSING record whose lease has not expired: the server refuses to settle it
  // (lease_active).
  bool leaseActive = false;
  // With leaseActive: how long until the lease ends, by the database's clock (record->
  // leaseExpiresAt says when).
  std::optional<std::chrono::milliseconds> leaseRemaining;
  // FAILED -> SUCCESS: a correction (the side effect happened after all), allowed by the server.
  bool correction = false;
  // Human-readable, strongest first. "blocking": the server will refuse the settle as asked
  // (side_effect_recorded without the override, or lease_active).
  std::vector<std::string> warnings;
  bool blocking = false;
};

// A settle's verdict is the server's own answer (ok, or the refusal, in the vocabulary's result
// codes: idemctl exits with exitCodeOf it), or none when the input was refused before anything
// was sent (a blank reason, a target that is not SUCCESS or FAILED, evidence that is not JSON).
using SettleVerdict = std::optional<ResultCode>;
inline constexpr SettleVerdict kSettleInputRefused = std::nullopt;

struct SettleOutcome {
  SettleVerdict verdict = kSettleInputRefused;
  std::string message;  // one line for the operator
  ChangeResult change;
  SettleAssessment assessment;
  std::vector<Transition> changesSince;  // on Conflict: what happened after expectedVersion
};

// "REFUND", "DEBIT or CAPTURE": flow kinds in a sentence.
std::string describeKinds(const std::vector<FundFlowKind>& kinds);

// Input errors, one sentence each; empty when the request may be sent.
std::vector<std::string> validateSettleRequest(const SettleRequest& request);

// Reads the record, the fund flows of its business object and the server's view of them
// (side_effect_recorded, lease_active) and derives the warnings for settling it to `to`. With
// overrideSideEffect, the recorded side effect still warns but no longer blocks.
SettleAssessment assessSettle(pqxx::connection& connection, const std::string& key, RecordStatus to,
                              bool overrideSideEffect = false);

// The whole checked path. Throws DatabaseError only for database failures; every refusal is a
// verdict with a message.
SettleOutcome settleRecord(pqxx::connection& connection, const SettleRequest& request);

}  // namespace idem

// The operator's settle, checked: the one code path behind the admin app's Settle dialog and
// `idemctl settle`. It validates the input, weighs the evidence (fund flows of the business
// object), refuses a FAILED decision that contradicts a recorded DEBIT unless explicitly
// overridden, settles with the version the operator saw, and on a conflict reports what changed
// since and by whom. Nothing is written unless every check passes.
#pragma once

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
  // Settle FAILED although a DEBIT flow exists for the business object.
  bool overrideDebitWarning = false;
};

// What the evidence says about a decision, before it is made.
struct SettleAssessment {
  std::optional<Record> record;
  std::vector<FundFlow> flows;
  bool debitRecorded = false;   // a DEBIT flow exists for the business object
  bool duplicateDebit = false;  // more than one: the customer was already charged twice
  // Human-readable, strongest first. "blocking" ones need overrideDebitWarning.
  std::vector<std::string> warnings;
  bool blocking = false;
};

enum class SettleVerdict {
  Settled,            // written
  InvalidInput,       // blank reason, bad target status, evidence that is not JSON: nothing sent
  NeedsOverride,      // FAILED while a DEBIT exists and no override: nothing written
  Conflict,           // the record changed since the operator looked: nothing written
  NotFound,
  InvalidTransition,  // the record is no longer PROCESSING or UNKNOWN
};

struct SettleOutcome {
  SettleVerdict verdict = SettleVerdict::InvalidInput;
  std::string message;  // one line for the operator
  ChangeResult change;
  SettleAssessment assessment;
  std::vector<Transition> changesSince;  // on Conflict: what happened after expectedVersion
};

// Input errors, one sentence each; empty when the request may be sent.
std::vector<std::string> validateSettleRequest(const SettleRequest& request);

// Reads the record and the fund flows of its business object and derives the warnings for
// settling it to `to`.
SettleAssessment assessSettle(pqxx::connection& connection, const std::string& key,
                              RecordStatus to);

// The whole checked path. Throws DatabaseError only for database failures; every refusal is a
// verdict with a message.
SettleOutcome settleRecord(pqxx::connection& connection, const SettleRequest& request);

}  // namespace idem

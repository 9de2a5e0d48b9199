#include "idem/settlement.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <pqxx/connection>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/record_queries.hpp"

namespace idem {
namespace {

bool isBlank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

std::string describe(const Transition& t) {
  std::string out = std::string(t.fromStatus ? format(*t.fromStatus) : "(created)") + " -> " +
                    std::string(format(t.toStatus)) + " (version " + std::to_string(t.version) +
                    ") by " + t.actor + " [" + std::string(format(t.actorKind)) + "]";
  if (t.reason) out += ": " + *t.reason;
  return out;
}

}  // namespace

std::vector<std::string> validateSettleRequest(const SettleRequest& request) {
  std::vector<std::string> problems;
  if (request.key.empty()) problems.emplace_back("the idempotency key is empty");
  if (request.to != RecordStatus::Success && request.to != RecordStatus::Failed) {
    problems.push_back("a record is settled to SUCCESS or FAILED, not " +
                       std::string(format(request.to)));
  }
  if (isBlank(request.reason)) {
    problems.emplace_back("a reason is required: say what evidence the decision rests on");
  }
  if (request.evidence && !request.evidence->empty() &&
      !nlohmann::json::accept(*request.evidence)) {
    problems.emplace_back("the evidence is not valid JSON");
  }
  if (request.expectedVersion && *request.expectedVersion < 1) {
    problems.emplace_back("the expected version must be 1 or more");
  }
  return problems;
}

SettleAssessment assessSettle(pqxx::connection& connection, const std::string& key,
                              RecordStatus to) {
  SettleAssessment out;
  pqxx::read_transaction tx(connection);
  out.record = findRecord(tx, key);
  if (!out.record) return out;
  out.flows = fundFlowsOf(tx, out.record->bizType, out.record->bizId);
  tx.commit();

  const auto debits = std::count_if(out.flows.begin(), out.flows.end(), [](const FundFlow& f) {
    return f.kind == FundFlowKind::Debit;
  });
  out.debitRecorded = debits > 0;
  out.duplicateDebit = debits > 1;
  if (out.duplicateDebit) {
    out.warnings.push_back("the customer was charged " + std::to_string(debits) +
                           " times for this business object: refund the duplicates");
  }
  if (to == RecordStatus::Failed && out.debitRecorded) {
    out.blocking = true;
    out.warnings.insert(out.warnings.begin(),
                        "a DEBIT flow exists for " + out.record->bizType + "/" +
                            out.record->bizId +
                            ": settling FAILED lets a retry charge the customer again");
  }
  if (to == RecordStatus::Success && !out.debitRecorded &&
      out.record->bizType == "payment") {
    out.warnings.emplace_back("no DEBIT flow is recorded for this payment: nothing shows the money moved");
  } else if (to == RecordStatus::Success && out.flows.empty()) {
    out.warnings.emplace_back("no fund flow is recorded for this business object");
  }
  return out;
}

SettleOutcome settleRecord(pqxx::connection& connection, const SettleRequest& request) {
  SettleOutcome out;
  if (const auto problems = validateSettleRequest(request); !problems.empty()) {
    out.verdict = SettleVerdict::InvalidInput;
    out.message = problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) out.message += "; " + problems[i];
    return out;
  }

  out.assessment = assessSettle(connection, request.key, request.to);
  if (!out.assessment.record) {
    out.verdict = SettleVerdict::NotFound;
    out.message = "no record has the idempotency key '" + request.key + "'";
    return out;
  }
  const Record& seen = *out.assessment.record;
  const int expected = request.expectedVersion.value_or(seen.version);

  if (out.assessment.blocking && !request.overrideDebitWarning) {
    out.verdict = SettleVerdict::NeedsOverride;
    out.message = out.assessment.warnings.front() +
                  "; confirm the gateway shows no charge, then override explicitly";
    return out;
  }

  std::optional<std::string> evidence = request.evidence;
  if (evidence && evidence->empty()) evidence.reset();
  ProtocolClient client(connection);
  out.change = client.settle(request.key, expected, request.to, request.reason, evidence);
  switch (out.change.result) {
    case ResultCode::Ok:
      out.verdict = SettleVerdict::Settled;
      out.message = "settled " + request.key + " to " + std::string(format(request.to)) +
                    " (version " + std::to_string(out.change.version.value_or(0)) + ")";
      break;
    case ResultCode::Conflict: {
      out.verdict = SettleVerdict::Conflict;
      pqxx::read_transaction tx(connection);
      out.changesSince = transitionsOf(tx, request.key, expected);
      tx.commit();
      out.message = "the record changed since version " + std::to_string(expected) +
                    "; nothing was written. Now " +
                    std::string(out.change.status ? format(*out.change.status) : "?") +
                    " at version " + std::to_string(out.change.version.value_or(0));
      if (!out.changesSince.empty()) out.message += ", last: " + describe(out.changesSince.back());
      break;
    }
    case ResultCode::NotFound:
      out.verdict = SettleVerdict::NotFound;
      out.message = "no record has the idempotency key '" + request.key + "' (any more)";
      break;
    case ResultCode::InvalidTransition:
      out.verdict = SettleVerdict::InvalidTransition;
      out.message = "only PROCESSING or UNKNOWN records can be settled; this one is " +
                    std::string(out.change.status ? format(*out.change.status) : "?");
      break;
  }
  return out;
}

}  // namespace idem

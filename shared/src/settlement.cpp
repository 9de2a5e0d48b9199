#include "idem/settlement.hpp"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <pqxx/connection>
#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "idem/record_queries.hpp"

namespace idem {
namespace {

// What the server says about the record's side effect and lease, by its own rule and clock:
// side_effect_recorded and what the business type declares come from idem.side_effect_of (the
// rule idem.settle enforces), never from counting flows here; the lease is compared with the
// database's now(), as idem.settle does.
constexpr const char* kServerView =
    "SELECT s.side_effect_recorded, s.ledger_can_tell, s.declared, s.effect_kinds, "
    "s.description, r.status = 'PROCESSING' AND r.lease_expires_at >= now(), "
    "greatest(0, (extract(epoch FROM r.lease_expires_at - now()) * 1000)::bigint), "
    "s.reversal_kinds "
    "FROM idem.records r CROSS JOIN LATERAL idem.side_effect_of(r.idempotency_key) s "
    "WHERE r.idempotency_key = $1";

// At most this many flows are named in one sentence; the evidence table shows them all.
constexpr std::size_t kFlowsNamed = 6;

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

std::string formatUtc(Timestamp t) {
  const std::time_t seconds =
      std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string objectOf(const Record& r) {
  return r.bizType + "/" + r.bizId;
}

// "DEBIT 2990 CNY (gw-1), CAPTURE 2990 CNY (gw-2)": kinds, amounts in minor units, references.
std::string describeFlows(const std::vector<FundFlow>& flows) {
  std::string out;
  for (std::size_t i = 0; i < flows.size() && i < kFlowsNamed; ++i) {
    const FundFlow& f = flows[i];
    if (i > 0) out += ", ";
    out += std::string(format(f.kind)) + " " + std::to_string(f.amountMinor) + " " + f.currency +
           " (" + f.externalRef + ")";
  }
  if (flows.size() > kFlowsNamed) {
    out += " and " + std::to_string(flows.size() - kFlowsNamed) + " more";
  }
  return out;
}

// "the lease ends at 2026-12-01 08:05:03 UTC, in 4m12s; its claimant may still answer"
std::string describeLease(const SettleAssessment& a) {
  std::string out = "the lease ends at ";
  out += a.record && a.record->leaseExpiresAt ? formatUtc(*a.record->leaseExpiresAt) : "?";
  // Under a second left reads "in 0s" otherwise; say so plainly.
  const auto left = a.leaseRemaining.value_or(std::chrono::milliseconds(0));
  out += left < std::chrono::seconds(1)
             ? ", in under a second"
             : ", in " + formatDuration(std::chrono::duration_cast<std::chrono::seconds>(left));
  out += "; its claimant may still answer";
  return out;
}

std::string sideEffectWarning(const SettleAssessment& a, bool overridden) {
  std::string out = "the ledger records the side effect of " + objectOf(*a.record) + " (" +
                    describeFlows(a.flows) + "): settling FAILED declares that the " +
                    a.record->bizType +
                    " did not happen, and a retry may carry it out a second time";
  if (overridden) out += "; overridden: the transition's evidence records the override";
  return out;
}

// For a type whose side effect leaves no line in the ledger: nothing the machine holds can tell.
std::string ledgerCannotTellWarning(const SettleAssessment& a) {
  return "the ledger cannot tell whether this " + a.record->bizType + " happened (" +
         a.typeDescription +
         "): FAILED is your word that it did not, and lets a retry carry it out again; check "
         "the downstream system first";
}

std::string statusOf(const ChangeResult& change) {
  return change.status ? std::string(format(*change.status)) : "?";
}

// A text[] of flow kinds, as the database spells them.
std::vector<FundFlowKind> flowKinds(const pqxx::field& field) {
  std::vector<FundFlowKind> out;
  auto kinds = field.as_array();
  for (auto item = kinds.get_next(); item.first != pqxx::array_parser::done;
       item = kinds.get_next()) {
    if (item.first == pqxx::array_parser::string_value) {
      out.push_back(parse<FundFlowKind>(item.second));
    }
  }
  return out;
}

// The assessment's reads, in one snapshot (repeatable read): the record, its flows and the server's
// view of them agree with each other even while agents and the ledger write.
SettleAssessment readAssessment(pqxx::connection& connection, const std::string& key) {
  return translatingErrors("weigh the evidence", [&] {
    SettleAssessment out;
    SnapshotRead tx(connection);
    out.record = findRecord(tx, key);
    if (!out.record) return out;
    out.flows = fundFlowsOf(tx, out.record->bizType, out.record->bizId);
    const pqxx::result view = tx.exec_params(kServerView, key);
    tx.commit();
    if (view.empty()) return out;  // cannot happen in one snapshot; then nothing is known
    const pqxx::row row = view[0];
    out.sideEffectRecorded = row[0].as<bool>();
    out.ledgerCanTell = row[1].as<bool>();
    out.typeDeclared = row[2].as<bool>();
    out.effectKinds = flowKinds(row[3]);
    out.reversalKinds = flowKinds(row[7]);
    out.typeDescription = row[4].c_str();
    out.leaseActive = row[5].as<bool>();
    if (out.leaseActive && !row[6].is_null()) {
      out.leaseRemaining = std::chrono::milliseconds(row[6].as<long long>());
    }
    return out;
  });
}

std::vector<Transition> changesAfter(pqxx::connection& connection, const std::string& key,
                                     int version) {
  return translatingErrors("read what changed", [&] {
    ReadTransaction tx(connection);
    std::vector<Transition> out = transitionsOf(tx, key, version);
    tx.commit();
    return out;
  });
}

// What the assessment's reads mean for a settle to `to`: the warnings, strongest first.
SettleAssessment weigh(SettleAssessment out, RecordStatus to, bool overrideSideEffect) {
  if (!out.record) return out;
  const Record& r = *out.record;

  // Strongest first: what the server will refuse, then what the operator should act on.
  if (r.status == RecordStatus::Success) {
    out.blocking = true;
    out.warnings.emplace_back("the record is SUCCESS, which is final: nothing can change it");
  } else if (r.status == RecordStatus::Failed && to == RecordStatus::Failed) {
    out.blocking = true;
    out.warnings.emplace_back("the record is FAILED already");
  }
  if (out.leaseActive) {
    out.blocking = true;
    out.warnings.push_back("the record is PROCESSING and its lease is live: " + describeLease(out));
  }
  if (to == RecordStatus::Failed && out.sideEffectRecorded && r.status != RecordStatus::Success) {
    if (!overrideSideEffect) out.blocking = true;
    out.warnings.push_back(sideEffectWarning(out, overrideSideEffect));
  } else if (to == RecordStatus::Failed && !out.ledgerCanTell &&
             r.status != RecordStatus::Success && r.status != RecordStatus::Failed) {
    out.warnings.push_back(ledgerCannotTellWarning(out));
  }
  // The database marks every flow after the first of its kind as a duplicate (duplicate_of).
  const auto duplicateDebits = std::count_if(
      out.flows.begin(), out.flows.end(),
      [](const FundFlow& f) { return f.kind == FundFlowKind::Debit && f.isDuplicate(); });
  out.duplicateDebit = duplicateDebits > 0;
  if (out.duplicateDebit) {
    out.warnings.push_back("the customer was charged " + std::to_string(duplicateDebits + 1) +
                           " times for " + objectOf(r) + ": refund the duplicates");
  }
  if (to == RecordStatus::Success && r.status != RecordStatus::Success) {
    out.correction = r.status == RecordStatus::Failed;
    if (out.correction) {
      out.warnings.emplace_back(
          "a correction: the record is FAILED; SUCCESS says the side effect happened after all");
    }
    if (!out.sideEffectRecorded && out.ledgerCanTell) {
      out.warnings.push_back("no " + describeKinds(out.effectKinds) + " flow for " + objectOf(r) +
                             " shows that it happened");
    }
  }
  return out;
}

SettleOutcome settle(pqxx::connection& connection, const SettleRequest& request) {
  SettleOutcome out;
  if (const auto problems = validateSettleRequest(request); !problems.empty()) {
    out.verdict = kSettleInputRefused;
    out.message = problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) out.message += "; " + problems[i];
    return out;
  }

  out.assessment = assessSettle(connection, request.key, request.to, request.overrideSideEffect);
  if (!out.assessment.record) {
    out.verdict = SettleVerdict(ResultCode::NotFound);
    out.message = "no record has the idempotency key '" + request.key + "'";
    return out;
  }
  const int expected = request.expectedVersion.value_or(out.assessment.record->version);

  // The server decides, even where the assessment already knows the answer: its rule is the one
  // that holds, and the record may change between this read and the settle.
  std::optional<std::string> evidence = request.evidence;
  if (evidence && evidence->empty()) evidence.reset();
  ProtocolClient client(connection);
  try {
    out.change = client.settle(request.key, expected, request.to, request.reason, evidence,
                               request.overrideSideEffect);
  } catch (const DatabaseError& e) {
    // Class 22: the server's own checks on the input (a reason with nothing visible in it, an
    // over-long one) refused it before anything was written. Anything else is not input.
    if (!e.sqlstate().starts_with("22")) throw;
    out.verdict = kSettleInputRefused;
    out.message = std::string("refused by the server: ") + e.what() + "; nothing was written";
    return out;
  }
  const std::string to(format(request.to));
  out.verdict = out.change.result;  // the server's answer is the verdict; below, its sentence
  switch (out.change.result) {
    case ResultCode::Ok:
      out.message = std::string(out.assessment.correction ? "corrected " : "settled ") +
                    request.key + " to " + to + " (version " +
                    std::to_string(out.change.version.value_or(0)) + ")";
      if (request.overrideSideEffect && out.assessment.sideEffectRecorded) {
        out.message += "; the override of the recorded side effect is in the transition's evidence";
      }
      break;
    case ResultCode::LeaseActive:
      out.assessment =
          assessSettle(connection, request.key, request.to, request.overrideSideEffect);
      out.message = "refused by the server (lease_active): " + request.key + " is PROCESSING and " +
                    describeLease(out.assessment) +
                    ". Settle it once the lease has ended; nothing was written";
      break;
    case ResultCode::SideEffectRecorded:
      out.assessment =
          assessSettle(connection, request.key, request.to, request.overrideSideEffect);
      out.message =
          "refused by the server (side_effect_recorded): the ledger records the side "
          "effect of " +
          (out.assessment.record ? objectOf(*out.assessment.record) : request.key) + ": " +
          describeFlows(out.assessment.flows) +
          ". FAILED would let a retry carry it out again; settle SUCCESS, or confirm "
          "with the downstream that it did not happen and override explicitly; nothing "
          "was written";
      break;
    case ResultCode::Conflict:
      out.changesSince = changesAfter(connection, request.key, expected);
      out.message = "the record changed since version " + std::to_string(expected) +
                    "; nothing was written. Now " + statusOf(out.change) + " at version " +
                    std::to_string(out.change.version.value_or(0));
      if (!out.changesSince.empty()) out.message += ", last: " + describe(out.changesSince.back());
      break;
    case ResultCode::NotFound:
      out.message = "no record has the idempotency key '" + request.key + "' (any more)";
      break;
    case ResultCode::InvalidTransition:
      if (out.change.status == RecordStatus::Success) {
        out.message = request.key + " is SUCCESS, which is final: nothing was written";
      } else if (out.change.status == request.to) {
        out.message = request.key + " is " + to + " already: nothing was written";
      } else {
        out.message = request.key + " is " + statusOf(out.change) + " and cannot be settled to " +
                      to + ": nothing was written";
      }
      break;
    case ResultCode::NotClaimant:
      // settle takes no claim token; this answer means the server and this client disagree.
      throw DatabaseError("",
                          "settle: the server answered not_claimant, which settle never "
                          "returns under schema contract v3");
  }
  return out;
}

}  // namespace

std::string describeKinds(const std::vector<FundFlowKind>& kinds) {
  std::string out;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += format(kinds[i]);
  }
  return out;
}

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

SettleAssessment assessSettle(pqxx::connection& connection, const std::string& key, RecordStatus to,
                              bool overrideSideEffect) {
  return translatingErrors("weigh the evidence", [&] {
    return weigh(readAssessment(connection, key), to, overrideSideEffect);
  });
}

SettleOutcome settleRecord(pqxx::connection& connection, const SettleRequest& request) {
  // The whole settle, its assessment, its prepared statements and its re-reads after a refusal,
  // answers in DatabaseError: no libpqxx exception reaches the caller.
  return translatingErrors("settle", [&] { return settle(connection, request); });
}

}  // namespace idem

// The domain vocabulary of the idem schema (docs/contract/schema.md) as C++ enums, each with one
// format/parse pair. The database rejects unknown values with CHECK constraints; these mirror them
// so that C++ callers get the same answer before a round trip, with a message that names the value.
#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace idem {

enum class RecordStatus { Processing, Success, Failed, Unknown };
enum class TriggerSource { Initial, Llm, Framework, Http, Callback };
enum class Outcome { Executed, Replayed, InProgress, PayloadMismatch, Rejected, Retired };
enum class FundFlowKind { Debit, Credit, Refund, Freeze, Unfreeze, Capture };
enum class ActorKind { System, Operator, Reconciler };
// What a state-changing protocol function says about the change it was asked for.
enum class ResultCode {
  Ok,
  Conflict,
  InvalidTransition,
  NotFound,
  NotClaimant,  // the claim token does not match: only the claimant may complete, fail,
                // mark_unknown
  LeaseActive,  // a PROCESSING record whose lease is live: its claimant may still answer
  MoneyMoved,   // FAILED refused: money moved for the business object
};

// The spelling of each value in the database, in declaration order.
template <typename E>
struct Vocabulary;

template <>
struct Vocabulary<RecordStatus> {
  static constexpr std::string_view name = "record status";
  static constexpr std::array<std::pair<RecordStatus, std::string_view>, 4> values{{
      {RecordStatus::Processing, "PROCESSING"},
      {RecordStatus::Success, "SUCCESS"},
      {RecordStatus::Failed, "FAILED"},
      {RecordStatus::Unknown, "UNKNOWN"},
  }};
};

template <>
struct Vocabulary<TriggerSource> {
  static constexpr std::string_view name = "trigger source";
  static constexpr std::array<std::pair<TriggerSource, std::string_view>, 5> values{{
      {TriggerSource::Initial, "initial"},
      {TriggerSource::Llm, "llm"},
      {TriggerSource::Framework, "framework"},
      {TriggerSource::Http, "http"},
      {TriggerSource::Callback, "callback"},
  }};
};

template <>
struct Vocabulary<Outcome> {
  static constexpr std::string_view name = "attempt outcome";
  static constexpr std::array<std::pair<Outcome, std::string_view>, 6> values{{
      {Outcome::Executed, "executed"},
      {Outcome::Replayed, "replayed"},
      {Outcome::InProgress, "in_progress"},
      {Outcome::PayloadMismatch, "payload_mismatch"},
      {Outcome::Rejected, "rejected"},
      {Outcome::Retired, "retired"},
  }};
};

template <>
struct Vocabulary<FundFlowKind> {
  static constexpr std::string_view name = "fund flow kind";
  static constexpr std::array<std::pair<FundFlowKind, std::string_view>, 6> values{{
      {FundFlowKind::Debit, "DEBIT"},
      {FundFlowKind::Credit, "CREDIT"},
      {FundFlowKind::Refund, "REFUND"},
      {FundFlowKind::Freeze, "FREEZE"},
      {FundFlowKind::Unfreeze, "UNFREEZE"},
      {FundFlowKind::Capture, "CAPTURE"},
  }};
};

template <>
struct Vocabulary<ActorKind> {
  static constexpr std::string_view name = "actor kind";
  static constexpr std::array<std::pair<ActorKind, std::string_view>, 3> values{{
      {ActorKind::System, "system"},
      {ActorKind::Operator, "operator"},
      {ActorKind::Reconciler, "reconciler"},
  }};
};

template <>
struct Vocabulary<ResultCode> {
  static constexpr std::string_view name = "result code";
  static constexpr std::array<std::pair<ResultCode, std::string_view>, 7> values{{
      {ResultCode::Ok, "ok"},
      {ResultCode::Conflict, "conflict"},
      {ResultCode::InvalidTransition, "invalid_transition"},
      {ResultCode::NotFound, "not_found"},
      {ResultCode::NotClaimant, "not_claimant"},
      {ResultCode::LeaseActive, "lease_active"},
      {ResultCode::MoneyMoved, "money_moved"},
  }};
};

// A value outside the vocabulary: names the value and lists what was expected.
class UnknownValue : public std::invalid_argument {
 public:
  UnknownValue(std::string_view vocabulary, std::string_view value, std::string expected);
};

template <typename E>
constexpr std::string_view format(E value) {
  for (const auto& [v, text] : Vocabulary<E>::values) {
    if (v == value) return text;
  }
  return "?";
}

template <typename E>
constexpr std::optional<E> tryParse(std::string_view text) {
  for (const auto& [v, spelling] : Vocabulary<E>::values) {
    if (spelling == text) return v;
  }
  return std::nullopt;
}

// All spellings, for messages: "PROCESSING, SUCCESS, FAILED or UNKNOWN".
template <typename E>
std::string spellings() {
  std::string out;
  const auto& values = Vocabulary<E>::values;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += (i + 1 == values.size()) ? " or " : ", ";
    out += values[i].second;
  }
  return out;
}

// Throws UnknownValue naming the value and the vocabulary.
template <typename E>
E parse(std::string_view text) {
  if (auto v = tryParse<E>(text)) return *v;
  throw UnknownValue(Vocabulary<E>::name, text, spellings<E>());
}

// Every value, in declaration order: for zero-initialising metrics and filling combo boxes.
template <typename E>
constexpr auto allValues() {
  std::array<E, Vocabulary<E>::values.size()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = Vocabulary<E>::values[i].first;
  return out;
}

// The statuses that still need a decision.
constexpr bool isUnsettled(RecordStatus s) {
  return s == RecordStatus::Processing || s == RecordStatus::Unknown;
}

// Outcomes answered by the idempotency layer without calling downstream (the hit ratio's
// numerator): a retired key is a retry the layer stopped as surely as a replay
// (docs/contract/metrics.md).
constexpr bool isHit(Outcome o) {
  return o == Outcome::Replayed || o == Outcome::InProgress || o == Outcome::Retired;
}

}  // namespace idem

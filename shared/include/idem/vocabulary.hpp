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
  // FAILED refused: the ledger records the record's side effect (its business type's effect
  // flows under its key or for its business object), so declaring it failed could run it twice
  SideEffectRecorded,
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
      {ResultCode::SideEffectRecorded, "side_effect_recorded"},
  }};
};

// How many values E has: the size of every array indexed by E.
template <typename E>
inline constexpr std::size_t kValueCount = Vocabulary<E>::values.size();

namespace detail {

// Does V name an enumerator of E? The compiler spells a template argument that names one as
// "E::Name" and one that names none as "(E)5" (GCC and Clang alike): the only way C++20 has to
// ask, at compile time, whether an enum has more values than a table lists.
template <typename E, E V>
constexpr bool namesEnumerator() {
  constexpr std::string_view signature = __PRETTY_FUNCTION__;
  constexpr std::size_t at = signature.rfind("V = ");
  return at != std::string_view::npos && signature[at + 4] != '(';
}

}  // namespace detail

// Does `values` list every enumerator of E exactly once, in declaration order, contiguous from 0,
// and nothing after the last? Then a value's position in it is its index, and an enumerator added
// to E without a place in the table is a compile error where the table is static_asserted.
template <typename E, std::size_t N>
constexpr bool listsEveryEnumeratorInOrder(const std::array<E, N>& values) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(values[i]) != i) return false;
  }
  return !detail::namesEnumerator<E, static_cast<E>(N)>();
}

// The same for a vocabulary: indexOf is then the position in Vocabulary<E>::values.
template <typename E>
constexpr bool listsEveryEnumeratorInOrder() {
  std::array<E, kValueCount<E>> values{};
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = Vocabulary<E>::values[i].first;
  return listsEveryEnumeratorInOrder(values);
}

static_assert(listsEveryEnumeratorInOrder<RecordStatus>(), "Vocabulary<RecordStatus> is stale");
static_assert(listsEveryEnumeratorInOrder<TriggerSource>(), "Vocabulary<TriggerSource> is stale");
static_assert(listsEveryEnumeratorInOrder<Outcome>(), "Vocabulary<Outcome> is stale");
static_assert(listsEveryEnumeratorInOrder<FundFlowKind>(), "Vocabulary<FundFlowKind> is stale");
static_assert(listsEveryEnumeratorInOrder<ActorKind>(), "Vocabulary<ActorKind> is stale");
static_assert(listsEveryEnumeratorInOrder<ResultCode>(), "Vocabulary<ResultCode> is stale");

// The position of a value in Vocabulary<E>::values: the index of its cell in every array sized by
// kValueCount<E>.
template <typename E>
constexpr std::size_t indexOf(E value) {
  static_assert(listsEveryEnumeratorInOrder<E>());
  return static_cast<std::size_t>(value);
}

// A value outside the vocabulary: names the value and lists what was expected.
class UnknownValue : public std::invalid_argument {
 public:
  UnknownValue(std::string_view vocabulary, std::string_view value, const std::string& expected);
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

// The agent's own first call for an operation; every other source is a retry by someone.
constexpr bool isFirstAttempt(TriggerSource s) {
  return s == TriggerSource::Initial;
}

// The retry sources, in vocabulary order: every source but the first attempt.
inline constexpr auto kRetrySources = [] {
  std::array<TriggerSource, kValueCount<TriggerSource> - 1> out{};
  std::size_t n = 0;
  for (const auto& [source, spelling] : Vocabulary<TriggerSource>::values) {
    if (!isFirstAttempt(source)) out[n++] = source;
  }
  return out;
}();

// The position of a retry source in kRetrySources: its cell in arrays of per-retry-source figures.
constexpr std::size_t retryIndexOf(TriggerSource s) {
  for (std::size_t i = 0; i < kRetrySources.size(); ++i) {
    if (kRetrySources[i] == s) return i;
  }
  return kRetrySources.size();  // the first attempt: no cell
}

// Exactly one source is the first attempt.
static_assert(retryIndexOf(TriggerSource::Initial) == kRetrySources.size());

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

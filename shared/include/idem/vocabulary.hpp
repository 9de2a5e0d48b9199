// The domain vocabulary of the idem schema (docs/contract/schema.md) as C++ enums, each with one
// format/parse pair. The enums, their spellings and their predicates are generated from
// shared/vocabulary.toml (idem/vocabulary_table.hpp), as are the database's CHECK constraints, so
// C++ callers get the database's answer before a round trip, with a message that names the value.
#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "idem/vocabulary_table.hpp"

namespace idem {

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

// Every generated table lists its enum's enumerators in order (the generator writes both; this
// holds a hand edit of either to account).
template <typename... E>
constexpr bool everyVocabularyListsItsEnum(std::tuple<E...>*) {
  return (listsEveryEnumeratorInOrder<E>() && ...);
}
static_assert(everyVocabularyListsItsEnum(static_cast<VocabularyEnums*>(nullptr)),
              "a Vocabulary<E> table is stale: run scripts/generate-vocabulary");

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

}  // namespace idem

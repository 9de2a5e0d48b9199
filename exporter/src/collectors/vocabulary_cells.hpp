// Dense counter cells indexed by the domain vocabulary (idem/vocabulary.hpp): how many values an
// enum has and where each value lives, both taken from the vocabulary itself, never typed by
// hand, so that a value added there (an outcome, an actor kind) resizes every array of the
// exporter instead of writing past its end.
#pragma once

#include <cstddef>

#include "idem/vocabulary.hpp"

namespace idem::exporter {

// How many values E has.
template <typename E>
inline constexpr std::size_t kValueCount = Vocabulary<E>::values.size();

// The cell of a value: its position in the vocabulary.
template <typename E>
constexpr std::size_t cellOf(E value) {
  return static_cast<std::size_t>(value);
}

// cellOf is the vocabulary's position only if the enum is declared in spelling order, from 0.
template <typename E>
constexpr bool declaredInVocabularyOrder() {
  for (std::size_t i = 0; i < kValueCount<E>; ++i) {
    if (static_cast<std::size_t>(Vocabulary<E>::values[i].first) != i) return false;
  }
  return true;
}

static_assert(declaredInVocabularyOrder<RecordStatus>());
static_assert(declaredInVocabularyOrder<TriggerSource>());
static_assert(declaredInVocabularyOrder<Outcome>());
static_assert(declaredInVocabularyOrder<FundFlowKind>());
static_assert(declaredInVocabularyOrder<ActorKind>());

}  // namespace idem::exporter

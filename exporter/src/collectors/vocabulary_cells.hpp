// Dense counter cells indexed by the domain vocabulary (idem/vocabulary.hpp): how many values an
// enum has (kValueCount) and where each value lives (indexOf), both taken from the vocabulary
// itself, never typed by hand, so that a value added there (an outcome, an actor kind) resizes
// every array of the exporter instead of writing past its end. vocabulary.hpp static_asserts that
// each vocabulary lists every enumerator once, in declaration order.
#pragma once

#include <cstddef>

#include "idem/vocabulary.hpp"

namespace idem::exporter {

// The cell of a value: its position in the vocabulary.
template <typename E>
constexpr std::size_t cellOf(E value) {
  return indexOf(value);
}

}  // namespace idem::exporter

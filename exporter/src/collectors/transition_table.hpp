// The cells of idempotency_transitions_total{from,to,actor_kind}: how many, where each combination
// lives, derived from the vocabulary, so a new status or actor kind resizes every array by itself.
// Which combinations the state machine allows is not written here: the transitions collector asks
// the database (idem.transition_allowed, the function the records trigger enforces).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/vocabulary_cells.hpp"
#include "idem/vocabulary.hpp"

namespace idem::exporter {

// A transition's from side: nullopt is a record's creation (from="none").
using FromStatus = std::optional<RecordStatus>;

// The dense cells of a (from, to, actor_kind) counter: "none" first, then the statuses.
struct TransitionCells {
  static constexpr std::size_t kFrom = kValueCount<RecordStatus> + 1;
  static constexpr std::size_t kTo = kValueCount<RecordStatus>;
  static constexpr std::size_t kActors = kValueCount<ActorKind>;
  static constexpr std::size_t kCount = kFrom * kTo * kActors;

  static constexpr std::size_t fromIndex(FromStatus from) { return from ? cellOf(*from) + 1 : 0; }
  static constexpr std::size_t index(FromStatus from, RecordStatus to, ActorKind actor) {
    return (fromIndex(from) * kTo + cellOf(to)) * kActors + cellOf(actor);
  }
  // The from side of a cell index's first coordinate.
  static constexpr FromStatus fromOf(std::size_t fromIndex) {
    if (fromIndex == 0) return std::nullopt;
    return allValues<RecordStatus>()[fromIndex - 1];
  }
  static std::string fromLabel(FromStatus from) {
    return from ? std::string(format(*from)) : std::string("none");
  }
  // The from side of a transitions row ("none" or a status); false for anything else.
  static bool parseFrom(std::string_view text, FromStatus& from) {
    if (text == "none") {
      from.reset();
      return true;
    }
    const auto s = tryParse<RecordStatus>(text);
    if (s) from = *s;
    return s.has_value();
  }
};

}  // namespace idem::exporter

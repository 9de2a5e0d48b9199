// The state machine of docs/contract/schema.md (version 2, "State machine"), as the exporter needs
// it: which (from, to, actor_kind) series of idempotency_transitions_total exist from the first
// scrape. The database enforces the table (idem.transition_allowed, called by the records trigger);
// this is its one copy in the exporter, and tst_exporter_counts checks it against
// idem.transition_allowed for every combination, so the two cannot drift apart unnoticed.
//
// Everything else about the cells of the counter (how many, where each combination lives) is
// derived from the vocabulary, so a new status or actor kind resizes every array by itself.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/vocabulary_cells.hpp"
#include "idem/vocabulary.hpp"

namespace idem::exporter {

// A transition's from side: nullopt is a record's creation (from="none").
using FromStatus = std::optional<RecordStatus>;

struct AllowedTransition {
  FromStatus from;
  RecordStatus to;
  ActorKind actor;
};

inline constexpr std::array<AllowedTransition, 15> kAllowedTransitions{{
    // begin: a new key, or a FAILED record re-claimed by the same request (retry_allowed)
    {std::nullopt, RecordStatus::Processing, ActorKind::System},
    {RecordStatus::Failed, RecordStatus::Processing, ActorKind::System},
    // complete / fail / mark_unknown by the claimant; expire_leases
    {RecordStatus::Processing, RecordStatus::Success, ActorKind::System},
    {RecordStatus::Processing, RecordStatus::Failed, ActorKind::System},
    {RecordStatus::Processing, RecordStatus::Unknown, ActorKind::System},
    // complete by the claimant whose answer came late (no UNKNOWN -> FAILED by the system in v2)
    {RecordStatus::Unknown, RecordStatus::Success, ActorKind::System},
    // resolve / reconcile from evidence
    {RecordStatus::Unknown, RecordStatus::Success, ActorKind::Reconciler},
    {RecordStatus::Unknown, RecordStatus::Failed, ActorKind::Reconciler},
    {RecordStatus::Processing, RecordStatus::Success, ActorKind::Reconciler},
    {RecordStatus::Processing, RecordStatus::Failed, ActorKind::Reconciler},
    // settle, with a reason; FAILED -> SUCCESS is a correction
    {RecordStatus::Unknown, RecordStatus::Success, ActorKind::Operator},
    {RecordStatus::Unknown, RecordStatus::Failed, ActorKind::Operator},
    {RecordStatus::Processing, RecordStatus::Success, ActorKind::Operator},
    {RecordStatus::Processing, RecordStatus::Failed, ActorKind::Operator},
    {RecordStatus::Failed, RecordStatus::Success, ActorKind::Operator},
}};

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

// No transition listed twice.
static_assert([] {
  for (std::size_t i = 0; i < kAllowedTransitions.size(); ++i) {
    for (std::size_t j = i + 1; j < kAllowedTransitions.size(); ++j) {
      const auto& a = kAllowedTransitions[i];
      const auto& b = kAllowedTransitions[j];
      if (a.from == b.from && a.to == b.to && a.actor == b.actor) return false;
    }
  }
  return true;
}());

}  // namespace idem::exporter

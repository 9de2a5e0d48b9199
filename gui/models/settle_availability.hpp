// Whether the selected record may be settled now, and if not, the one sentence that says why, as
// the server will decide it. Which changes an operator may make is the database's word
// (idem.transition_allowed, read once per connection into OperatorMoves), never a second copy of
// the state machine here; what this adds is the lease: a PROCESSING record whose lease is live may
// not be settled (its claimant may still answer: lease_active) until the lease ends, by the
// server's clock. The database enforces all of it; this says it first, so the action is disabled
// with a reason instead of refused after typing one.
#pragma once

#include <QString>
#include <array>
#include <optional>
#include <pqxx/transaction_base>

#include "idem/domain.hpp"

namespace idem::admin {

// The operator's edges of the state machine, as idem.transition_allowed(from, to, 'operator')
// answers them for every pair of statuses.
class OperatorMoves {
 public:
  bool allows(RecordStatus from, RecordStatus to) const {
    return allowed_[indexOf(from)][indexOf(to)];
  }
  // Any change at all from this status: none means the status is final for an operator.
  bool anyFrom(RecordStatus from) const;
  void allow(RecordStatus from, RecordStatus to) { allowed_[indexOf(from)][indexOf(to)] = true; }
  bool operator==(const OperatorMoves&) const = default;

 private:
  std::array<std::array<bool, kValueCount<RecordStatus>>, kValueCount<RecordStatus>> allowed_{};
};

// Asks the database (executable by every reader role).
OperatorMoves readOperatorMoves(pqxx::transaction_base& tx);

struct SettleAvailability {
  bool allowed = false;
  // A settled record (FAILED) changed by a person: only the correction the database allows is
  // offered (to SUCCESS: the side effect happened after all).
  bool correction = false;
  // Not allowed: why, one sentence. Allowed: what the action will do.
  QString explanation;
  // A PROCESSING record whose lease is live: when settling becomes possible (server clock).
  std::optional<Timestamp> leaseEndsAt;
};

// serverNow: the server's clock (the client's clock plus the measured offset), which is the one
// lease_expires_at is compared with.
SettleAvailability settleAvailability(const Record& record, Timestamp serverNow,
                                      const OperatorMoves& moves);

}  // namespace idem::admin

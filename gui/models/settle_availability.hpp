// Whether the selected record may be settled now, and if not, the one sentence that says why, as
// the server will decide it (docs/contract/schema.md, v2): UNKNOWN, and PROCESSING once its lease
// has expired, may be settled to SUCCESS or FAILED; a PROCESSING record whose lease is live may not
// (its claimant may still answer: lease_active), until the lease ends; FAILED may only be corrected
// to SUCCESS (the money moved after all); SUCCESS is final. The database enforces all of it; this
// says it first, so the action is disabled with a reason instead of refused after typing one.
#pragma once

#include <QString>
#include <optional>

#include "idem/domain.hpp"

namespace idem::admin {

struct SettleAvailability {
  bool allowed = false;
  // FAILED: only the correction to SUCCESS is offered.
  bool correction = false;
  // Not allowed: why, one sentence. Allowed: what the action will do.
  QString explanation;
  // A PROCESSING record whose lease is live: when settling becomes possible (server clock).
  std::optional<Timestamp> leaseEndsAt;
};

// serverNow: the server's clock (the client's clock plus the measured offset), which is the one
// lease_expires_at is compared with.
SettleAvailability settleAvailability(const Record& record, Timestamp serverNow);

// The target statuses the dialog offers for a record of this status.
bool offersTarget(RecordStatus from, RecordStatus to);

}  // namespace idem::admin

// Stale results are dropped, the way Hotspot's JobTracker does it: every requester (a table, the
// detail pane) owns a Generation that moves on whenever what it shows changes (a new filter,
// another record). A request carries the generation it was made for; the worker skips requests that
// went stale while they queued, and the requester ignores results for an older generation.
#pragma once

#include <QtGlobal>
#include <atomic>
#include <memory>

namespace idem::admin {

struct JobTicket {
  quint64 job = 0;
  quint64 generation = 0;
  // The requester's current generation, readable from the worker thread; null: never stale
  // (settle: a decision is always carried out or refused, never silently skipped).
  std::shared_ptr<const std::atomic<quint64>> current;

  bool isStale() const { return current && current->load(std::memory_order_acquire) != generation; }
};

class Generation {
 public:
  Generation() : value_(std::make_shared<std::atomic<quint64>>(1)) {}
  quint64 current() const { return value_->load(std::memory_order_acquire); }
  // Everything requested so far is stale from now on.
  quint64 advance() { return value_->fetch_add(1, std::memory_order_acq_rel) + 1; }
  JobTicket ticket(quint64 job) const { return {job, current(), value_}; }

 private:
  std::shared_ptr<std::atomic<quint64>> value_;
};

}  // namespace idem::admin

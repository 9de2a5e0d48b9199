// What the records table shows: the filters an operator sets and the order, all applied by the
// server. A cursor is the position of a row in that order, for keyset paging.
#pragma once

#include <QMetaType>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "idem/domain.hpp"

namespace idem::admin {

// Sorted by updated_at or created_at, the idempotency key breaking ties, so the order is total and
// every page boundary is exact.
enum class RecordOrder { UpdatedDesc, UpdatedAsc, CreatedDesc, CreatedAsc };

bool isDescending(RecordOrder order);
bool sortsByUpdated(RecordOrder order);

struct RecordFilter {
  std::vector<RecordStatus> statuses;  // empty: any status
  // PROCESSING past its lease, or UNKNOWN: the records that need a person.
  bool stuckOnly = false;
  std::string bizType;      // exact; empty: any
  std::string key;          // exact idempotency key; empty: any
  std::string bizIdPrefix;  // biz_id starts with this, byte for byte; empty: any
  // A time range on the sorted column, [from, to).
  std::optional<Timestamp> from;
  std::optional<Timestamp> to;
  // The sorted column within the last `within` of the server's clock (moves with every refresh).
  std::optional<std::chrono::seconds> within;
  RecordOrder order = RecordOrder::UpdatedDesc;

  bool operator==(const RecordFilter&) const = default;

  // The needs-attention queue: stuck records, the one stuck longest first.
  static RecordFilter attention();
};

// A row's position in an order: its sort timestamp and its key.
struct RecordCursor {
  Timestamp at{};
  std::string key;
  bool operator==(const RecordCursor&) const = default;
};

RecordCursor cursorOf(const Record& record, RecordOrder order);

}  // namespace idem::admin

Q_DECLARE_METATYPE(idem::admin::RecordFilter)

#include "models/record_filter.hpp"

namespace idem::admin {

bool isDescending(RecordOrder order) {
  return order == RecordOrder::UpdatedDesc || order == RecordOrder::CreatedDesc;
}

bool sortsByUpdated(RecordOrder order) {
  return order == RecordOrder::UpdatedDesc || order == RecordOrder::UpdatedAsc;
}

RecordFilter RecordFilter::attention() {
  RecordFilter f;
  f.stuckOnly = true;
  f.order = RecordOrder::UpdatedAsc;
  return f;
}

RecordCursor cursorOf(const Record& record, RecordOrder order) {
  return {sortsByUpdated(order) ? record.updatedAt : record.createdAt, record.idempotencyKey};
}

}  // namespace idem::admin

#include "models/record_page_query.hpp"

#include "idem/record_queries.hpp"

namespace idem::admin {
namespace {

// A Timestamp parameter (microseconds since the epoch) back to timestamptz, exactly: integer
// microseconds times an interval, no floating point in the way of keyset equality.
std::string timestampParam(const std::string& placeholder) {
  return "(timestamptz 'epoch' + " + placeholder + "::bigint * interval '1 microsecond')";
}

std::string micros(Timestamp t) {
  return std::to_string(t.time_since_epoch().count());
}

class StatementText {
 public:
  std::string bind(std::string value) {
    params_.push_back(std::move(value));
    // Appended, not "$" + to_string(): GCC 12 at -O3 warns falsely (-Wrestrict) on the insert
    // at the front that operator+(const char*, string&&) does.
    std::string placeholder = "$";
    placeholder += std::to_string(params_.size());
    return placeholder;
  }
  void require(const std::string& condition) {
    where_ += where_.empty() ? " WHERE " : " AND ";
    where_ += condition;
  }
  BoundQuery finish(const std::string& head, const std::string& tail) {
    return {head + where_ + tail, std::move(params_)};
  }

 private:
  std::string where_;
  std::vector<std::string> params_;
};

const char* sortColumn(RecordOrder order) {
  return sortsByUpdated(order) ? "updated_at" : "created_at";
}

std::string orderBy(RecordOrder order) {
  const std::string direction = isDescending(order) ? " DESC" : " ASC";
  return std::string(" ORDER BY ") + sortColumn(order) + direction + ", idempotency_key" +
         direction;
}

void applyFilter(StatementText& s, const RecordFilter& f) {
  if (f.statuses.size() == 1) {
    s.require("status = " + s.bind(std::string(format(f.statuses.front()))));
  } else if (!f.statuses.empty()) {
    std::string array = "{";
    for (std::size_t i = 0; i < f.statuses.size(); ++i) {
      if (i > 0) array += ',';
      array += format(f.statuses[i]);
    }
    array += '}';
    s.require("status = ANY(" + s.bind(array) + "::text[])");
  }
  if (f.stuckOnly) {
    // The schema's definition (sql/migrations/010); inlined, it still reads records_unsettled.
    s.require("idem.is_stuck(status, lease_expires_at)");
  }
  if (!f.bizType.empty()) s.require("biz_type = " + s.bind(f.bizType));
  if (!f.key.empty()) s.require("idempotency_key = " + s.bind(f.key));
  // ^@ (starts with) compares bytes, with no wildcard characters to escape, and under the "C"
  // collation it is answered from records_biz_id_prefix (sql/migrations/005_admin.sql) as a range
  // scan.
  if (!f.bizIdPrefix.empty()) s.require("biz_id COLLATE \"C\" ^@ " + s.bind(f.bizIdPrefix));
  const std::string column = sortColumn(f.order);
  if (f.from) s.require(column + " >= " + timestampParam(s.bind(micros(*f.from))));
  if (f.to) s.require(column + " < " + timestampParam(s.bind(micros(*f.to))));
  if (f.within) {
    s.require(column + " >= now() - " + s.bind(std::to_string(f.within->count())) +
              "::bigint * interval '1 second'");
  }
}

// Rows strictly after the cursor in the filter's order (`after`), or at or before it (`through`).
void applyCursor(StatementText& s, RecordOrder order, const RecordCursor& cursor, bool after) {
  const bool descending = isDescending(order);
  const char* op = after ? (descending ? " < " : " > ") : (descending ? " >= " : " <= ");
  const std::string at = timestampParam(s.bind(micros(cursor.at)));
  const std::string key = s.bind(cursor.key);
  s.require(std::string("(") + sortColumn(order) + ", idempotency_key)" + op + "(" + at + ", " +
            key + ")");
}

}  // namespace

BoundQuery pageQuery(const RecordFilter& filter, const std::optional<RecordCursor>& after,
                     int limit) {
  StatementText s;
  applyFilter(s, filter);
  if (after) applyCursor(s, filter.order, *after, true);
  const std::string tail = orderBy(filter.order) + " LIMIT " + s.bind(std::to_string(limit));
  return s.finish(idem::kRecordListSelect, tail);
}

BoundQuery windowQuery(const RecordFilter& filter, const RecordCursor& through, int limit) {
  StatementText s;
  applyFilter(s, filter);
  applyCursor(s, filter.order, through, false);
  const std::string tail = orderBy(filter.order) + " LIMIT " + s.bind(std::to_string(limit));
  return s.finish(idem::kRecordListSelect, tail);
}

BoundQuery moreAfterQuery(const RecordFilter& filter, const RecordCursor& after) {
  StatementText s;
  applyFilter(s, filter);
  applyCursor(s, filter.order, after, true);
  BoundQuery q = s.finish("SELECT EXISTS (SELECT 1 FROM idem.records", ")");
  return q;
}

Record recordFromListRow(const pqxx::row& r) {
  return idem::recordFromRow(r);
}

}  // namespace idem::admin

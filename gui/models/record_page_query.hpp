// The SQL behind the records table. Keyset pagination only: a page is "the next n rows after this
// (timestamp, key)", answered from records_by_updated / records_by_created at the same cost on page
// one and page fifty thousand; OFFSET would read and discard every row before the page.
//
// Statements are assembled from the constant fragments below, one per filter that is set; every
// value the operator typed travels as a bound parameter ($n), never inside the SQL text.
#pragma once

#include <optional>
#include <pqxx/row>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/record_filter.hpp"

namespace idem::admin {

struct BoundQuery {
  std::string sql;
  std::vector<std::string> params;  // $1, $2, ... in order; never null
};

// The next `limit` rows after `after` (or the first rows), in the filter's order.
BoundQuery pageQuery(const RecordFilter& filter, const std::optional<RecordCursor>& after,
                     int limit);

// For a refresh: the rows from the top of the order through `through` (inclusive), at most
// `limit`. Re-reading exactly the span the operator has loaded keeps the table's shape.
BoundQuery windowQuery(const RecordFilter& filter, const RecordCursor& through, int limit);

// SELECT EXISTS: does any row follow `after`? (Whether the table can fetch more after a refresh.)
BoundQuery moreAfterQuery(const RecordFilter& filter, const RecordCursor& after);

// A row of the three queries above as a Record, without payloads (the detail reads those).
Record recordFromListRow(const pqxx::row& row);

}  // namespace idem::admin

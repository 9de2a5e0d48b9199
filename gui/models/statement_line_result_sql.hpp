// The results a person must look at (idem::needsPerson: mismatched, unmatched, duplicate) as the
// SQL list `('mismatched', 'unmatched', 'duplicate')`, derived from the vocabulary once. A literal
// list, not a bound array, so that the planner reads the partial index statement_lines_needs_person
// (sql/migrations/015_gateway_evidence.sql), whose predicate is the same list.
#pragma once

#include <string>

namespace idem::admin {

const std::string& needsPersonResultsSql();

}  // namespace idem::admin

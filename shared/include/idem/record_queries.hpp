// Reading one record and its evidence: the record, its transitions, the attempts for its key and
// the fund flows of its business object. The admin app's detail view and `idemctl settle` use
// these.
#pragma once

#include <optional>
#include <pqxx/row>
#include <pqxx/transaction_base>
#include <string>
#include <vector>

#include "idem/domain.hpp"

namespace idem {

// The records listing, "SELECT <columns> FROM idem.records": a caller appends its WHERE, ORDER BY
// and LIMIT and maps each row with recordFromRow; the admin app's keyset pages are built on it. No
// payloads: a page of 200 rows stays a few tens of kilobytes however large the requests are.
// last_error is cut to 400 characters; findRecord, for the detail, reads it whole.
extern const char* const kRecordListSelect;

// A row of kRecordListSelect, or of findRecord's statement (which adds the payloads and
// retry_allowed after the same columns), as a Record.
Record recordFromRow(const pqxx::row& row);

std::optional<Record> findRecord(pqxx::transaction_base& tx, const std::string& key);

// Oldest first. afterVersion > 0 keeps only the changes made after that version: "what changed
// since I looked".
std::vector<Transition> transitionsOf(pqxx::transaction_base& tx, const std::string& key,
                                      int afterVersion = 0);

// Newest first, at most limit.
std::vector<Attempt> attemptsOf(pqxx::transaction_base& tx, const std::string& key,
                                int limit = 500);

// Oldest first: the first flow of each kind, then its duplicates.
std::vector<FundFlow> fundFlowsOf(pqxx::transaction_base& tx, const std::string& bizType,
                                  const std::string& bizId);

}  // namespace idem

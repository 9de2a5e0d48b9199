// Reading one record and its evidence: the record, its transitions, the attempts for its key and
// the fund flows of its business object. The admin app's detail view and `idemctl settle` use
// these.
#pragma once

#include <optional>
#include <pqxx/transaction_base>
#include <string>
#include <vector>

#include "idem/domain.hpp"

namespace idem {

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

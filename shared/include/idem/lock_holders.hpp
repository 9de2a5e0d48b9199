// Who holds the locks an idemwatch command waited for, for the sentence that says so: the sessions
// of this database (but the caller's) holding a lock on an idem relation or an advisory lock,
// with their user, application, state, how long their transaction has run and what it last ran.
#pragma once

#include <pqxx/connection>
#include <string>

namespace idem {

// "pid 1234 (alice, psql, idle in transaction for 00:05:12: SELECT ...); ..." (at most ten);
// "a session that has since let go" when none holds one any more. Never throws.
std::string describeLockHolders(pqxx::connection& connection);

}  // namespace idem

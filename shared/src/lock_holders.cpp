#include "idem/lock_holders.hpp"

#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"

namespace idem {
namespace {

// The sessions holding locks on idem relations (or retention's and migrate's advisory locks), but
// this one: who a migration waited for.
constexpr const char* kLockHolders = R"SQL(
SELECT DISTINCT a.pid, coalesce(a.usename::text, '?'), coalesce(nullif(a.application_name, ''), '?'),
       coalesce(a.state, '?'),
       coalesce(to_char(now() - a.xact_start, 'HH24:MI:SS'), '?'),
       left(regexp_replace(coalesce(a.query, ''), '\s+', ' ', 'g'), 80)
  FROM pg_catalog.pg_locks AS l
  JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
 WHERE l.granted AND l.pid <> pg_catalog.pg_backend_pid()
   AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
   AND (l.relation IN (SELECT c.oid FROM pg_catalog.pg_class AS c
                        WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace
                                                 WHERE nspname = 'idem'))
        OR l.locktype = 'advisory')
 ORDER BY a.pid
 LIMIT 10
)SQL";

}  // namespace

std::string describeLockHolders(pqxx::connection& connection) {
  try {
    ReadTransaction tx(connection);
    std::string out;
    for (const pqxx::row& r : tx.exec(kLockHolders)) {
      if (!out.empty()) out += "; ";
      out += std::string("pid ") + r[0].c_str() + " (" + r[1].c_str() + ", " + r[2].c_str() + ", " +
             r[3].c_str() + " for " + r[4].c_str() + ": " + r[5].c_str() + ")";
    }
    return out.empty() ? "a session that has since let go" : out;
  } catch (const std::exception& e) {
    return std::string("(who, could not be read: ") + e.what() + ")";
  }
}

}  // namespace idem

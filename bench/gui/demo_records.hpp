// Demo data for the admin app's screenshot and for trying it by hand: a few hundred records made
// through the real protocol functions (so the history, the attempts and the ledger are what the
// product would record), then spread over the last hours so that ages read like a real day.
#pragma once

#include <pqxx/connection>
#include <string>

namespace idem::bench {

struct DemoResult {
  std::string showcase;  // an UNKNOWN payment with a rich history: what the screenshot selects
  int records = 0;
};

// `owner` must be a superuser connection to a migrated database; `operatorDsn(role)` gives a DSN
// that logs in as role (for the decisions operators already made, attributed to them).
DemoResult seedDemo(pqxx::connection& owner, const std::string& dsn);

}  // namespace idem::bench

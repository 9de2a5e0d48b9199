// Ten million records in a few minutes, for the admin app's benchmark: INSERT ... SELECT
// generate_series as the owner, with the records triggers off and the secondary indexes dropped
// during the load (then rebuilt from their own definitions), in the benchmark's own database only.
#pragma once

#include <cstdint>
#include <pqxx/connection>
#include <string>

namespace idem::bench {

struct BulkMix {
  std::int64_t rows = 10'000'000;
  int days = 30;  // created_at spread over the last `days`
};

// The rows already there (the benchmark reuses a loaded database); -1 if the marker is missing.
std::int64_t loadedRows(pqxx::connection& owner);

// Empties idem.records and loads `mix.rows` rows: ~95% SUCCESS, ~4.9% FAILED, 5,000 UNKNOWN and
// 5,000 PROCESSING (half past their lease); payment 59%, coupon 24%, refund 18% (independent of the
// status: biz type from g mod 17, status from g mod 20 and g mod 2000); md5 keys (random
// order, like UUIDs); biz ids ord-/cpn-/rfd- plus an 8-digit number. Prints progress to stderr.
void loadRecords(pqxx::connection& owner, const BulkMix& mix);

}  // namespace idem::bench

#include "bulk_records.hpp"

#include <chrono>
#include <iostream>
#include <pqxx/pqxx>
#include <vector>

namespace idem::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// One chunk of rows [$1, $2). g numbers the row; every column is a function of g, so a reload
// produces the same table. Stuck records are spread through the whole time range.
constexpr const char* kChunk = R"SQL(
INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, request_payload, response_payload, last_error,
                          attempt_count, created_at, updated_at)
SELECT 'key-' || md5(g::text),
       t.biz_type,
       t.prefix || lpad(g::text, 8, '0'),
       t.tool,
       md5('req' || g::text),
       s.status,
       CASE WHEN s.status = 'PROCESSING' THEN 1 ELSE 2 END,
       c.created + interval '30 seconds' * CASE WHEN s.status = 'PROCESSING' AND (g / 2000) % 2 = 0 THEN 1000000 ELSE 1 END,
       jsonb_build_object('amount_minor', 100 + g % 90000, 'currency', 'CNY', 'order', t.prefix || g),
       CASE WHEN s.status = 'SUCCESS' THEN jsonb_build_object('gateway_ref', 'gw-' || g) END,
       CASE s.status WHEN 'FAILED' THEN 'card declined' WHEN 'UNKNOWN' THEN 'response timeout after 5s' END,
       1,
       c.created,
       c.created + CASE s.status WHEN 'PROCESSING' THEN interval '0'
                                 WHEN 'UNKNOWN' THEN interval '35 seconds'
                                 ELSE (50 + g % 4950) * interval '1 millisecond' END
FROM generate_series($1::bigint, $2::bigint - 1) AS g
CROSS JOIN LATERAL (SELECT CASE WHEN g % 17 < 10 THEN 'payment' WHEN g % 17 < 14 THEN 'coupon' ELSE 'refund' END AS biz_type) AS b
CROSS JOIN LATERAL (SELECT b.biz_type,
                           CASE b.biz_type WHEN 'payment' THEN 'ord-' WHEN 'coupon' THEN 'cpn-' ELSE 'rfd-' END AS prefix,
                           CASE b.biz_type WHEN 'payment' THEN 'pay' WHEN 'coupon' THEN 'issue_coupon' ELSE 'refund' END AS tool) AS t
CROSS JOIN LATERAL (SELECT CASE WHEN g % 2000 = 1 THEN 'UNKNOWN'
                                WHEN g % 2000 = 2 THEN 'PROCESSING'
                                WHEN g % 20 = 3 THEN 'FAILED'
                                ELSE 'SUCCESS' END AS status) AS s
CROSS JOIN LATERAL (SELECT now() - $3::int * interval '1 day'
                           + (g::double precision / $4::double precision) * $3::int * interval '1 day'
                           + (g % 997) * interval '1 microsecond' AS created) AS c
)SQL";

}  // namespace

std::int64_t loadedRows(pqxx::connection& owner) {
  pqxx::nontransaction tx(owner);
  const auto r = tx.exec("SELECT CASE WHEN to_regclass('idem_bench.loaded') IS NULL THEN -1 END");
  if (!r[0][0].is_null()) return -1;
  const auto rows = tx.exec("SELECT rows FROM idem_bench.loaded");
  return rows.empty() ? -1 : rows[0][0].as<std::int64_t>();
}

void loadRecords(pqxx::connection& owner, const BulkMix& mix) {
  const auto start = Clock::now();
  std::vector<std::pair<std::string, std::string>> indexes;  // name, definition
  {
    pqxx::work tx(owner);
    tx.exec("CREATE SCHEMA IF NOT EXISTS idem_bench");
    tx.exec("DROP TABLE IF EXISTS idem_bench.loaded");
    tx.exec("TRUNCATE idem.records, idem.attempts, idem.transitions");
    for (const auto& row :
         tx.exec("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'idem' "
                 "AND tablename = 'records' AND indexname <> 'records_pkey'")) {
      indexes.emplace_back(row[0].c_str(), row[1].c_str());
    }
    for (const auto& [name, definition] : indexes)
      tx.exec("DROP INDEX idem." + tx.quote_name(name));
    tx.commit();
  }
  const std::int64_t chunk = 500'000;
  for (std::int64_t first = 1; first <= mix.rows; first += chunk) {
    const std::int64_t end = std::min(first + chunk, mix.rows + 1);
    pqxx::work tx(owner);
    // Only in this database, only for the load: the rows are generated whole, with their final
    // status, so there is no history to write and no state machine to check.
    tx.exec("ALTER TABLE idem.records DISABLE TRIGGER USER");
    tx.exec_params(kChunk, first, end, mix.days, mix.rows);
    tx.exec("ALTER TABLE idem.records ENABLE TRIGGER USER");
    tx.commit();
    std::cerr << "\r  loaded " << (end - 1) << " / " << mix.rows << " rows ("
              << static_cast<int>(seconds(start)) << " s)" << std::flush;
  }
  std::cerr << "\n";
  for (const auto& [name, definition] : indexes) {
    const auto t = Clock::now();
    pqxx::nontransaction tx(owner);
    tx.exec("SET maintenance_work_mem = '512MB'");
    tx.exec(definition);
    std::cerr << "  index " << name << ": " << static_cast<int>(seconds(t)) << " s\n";
  }
  {
    pqxx::nontransaction tx(owner);
    tx.exec("VACUUM (ANALYZE) idem.records");
    tx.exec("CREATE TABLE idem_bench.loaded AS SELECT " + std::to_string(mix.rows) +
            "::bigint AS rows");
  }
  std::cerr << "  loaded and analysed in " << static_cast<int>(seconds(start)) << " s\n";
}

}  // namespace idem::bench

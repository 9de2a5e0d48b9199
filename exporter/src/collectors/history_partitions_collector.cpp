// The history's day partitions (schema migration 017): until when, from today on, each history
// table has its day partitions made without a gap, and how many rows its DEFAULT partition holds. A
// day without its partition still takes writes (into the DEFAULT partition) but retention can no
// longer drop it whole, and moving those rows out later holds the table: so the days are made a
// week ahead (idem.prepare_history_partitions, which idemctl migrate, purge and expire-leases run),
// and an alert warns when less than a day is left. Publishes
// idempotency_history_partitioned_until_timestamp_seconds{table} and
// idempotency_history_default_partition_rows{table}; nothing on an older schema.
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "incremental_reader.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// From the catalog, readable by any login: each range partition's bounds as pg_get_expr prints
// them (an upgraded database's old table starts at MINVALUE), printed and parsed once (a bound
// printed again for each of the 367 days it was tested against cost 66 ms at a week of days), and
// only those that end after today's start, the ones that can cover a day from today on (testing
// every day against the bounds of every past day cost 35 ms a table at 300 days); then the start
// of the first day from today (UTC) that no partition covers whole. The DEFAULT partition's rows
// are the statistics' live count.
constexpr const char* kPartitionedUntil = R"SQL(
WITH history(name) AS (SELECT unnest($1::text[])),
today(start) AS (SELECT (now() AT TIME ZONE 'UTC')::date::timestamp AT TIME ZONE 'UTC'),
bounds AS MATERIALIZED (
    SELECT p.name, coalesce(p.b[1]::timestamptz, '-infinity') AS lo, p.b[2]::timestamptz AS hi
      FROM (SELECT h.name,
                   regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                'FROM \((?:''([^'']+)''|MINVALUE)\) TO \(''([^'']+)''\)') AS b
              FROM history AS h
              JOIN pg_inherits AS i ON i.inhparent = to_regclass('idem.' || h.name)
              JOIN pg_class AS c ON c.oid = i.inhrelid) AS p
     WHERE p.b[2]::timestamptz > (SELECT t.start FROM today AS t)),
days AS (
    SELECT g, t.start + g * interval '1 day' AS day_start
      FROM today AS t, generate_series(0, 366) AS g)
SELECT h.name,
       extract(epoch FROM coalesce(
           (SELECT min(d.day_start) FROM days AS d
             WHERE NOT EXISTS (SELECT 1 FROM bounds AS b
                                WHERE b.name = h.name AND b.lo <= d.day_start
                                  AND b.hi >= d.day_start + interval '1 day')),
           (SELECT max(d.day_start) + interval '1 day' FROM days AS d)))::float8,
       coalesce((SELECT s.n_live_tup FROM pg_stat_all_tables AS s
                  WHERE s.relid = to_regclass('idem.' || h.name || '_outside')), 0)::float8
  FROM history AS h
 WHERE EXISTS (SELECT 1 FROM pg_partitioned_table AS p
                WHERE p.partrelid = to_regclass('idem.' || h.name))
)SQL";

// kHistoryTablesByDay as a text[] parameter.
std::string historyTables() {
  std::string out = "{";
  for (std::string_view name : kHistoryTablesByDay) {
    if (out.size() > 1) out += ',';
    out += name;
  }
  return out + "}";
}

class HistoryPartitionsCollector : public Collector {
 public:
  std::string_view name() const override { return "history_partitions"; }
  // Days change once a day; the read is a few catalog rows.
  std::chrono::milliseconds interval() const override { return std::chrono::seconds(60); }

  void update(pqxx::connection& connection) override {
    std::map<std::string, Figures> next;
    {
      idem::ReadTransaction tx(connection);
      for (const pqxx::row& row : tx.exec_params(kPartitionedUntil, historyTables()))
        next[row[0].c_str()] = {row[1].as<double>(), row[2].as<double>()};
      tx.commit();
    }
    std::lock_guard lock(mutex_);
    state_ = std::move(next);
  }

  void collect(std::vector<prometheus::MetricFamily>& out) const override {
    std::lock_guard lock(mutex_);
    if (!state_ || state_->empty()) return;  // nothing read yet, or a schema before day partitions
    auto ahead = makeFamily(
        "idempotency_history_partitioned_until_timestamp_seconds",
        "Until when, from today (UTC) on, the history table has its day partitions without a gap, "
        "as Unix time: today's start when today's rows go to the DEFAULT partition. "
        "idem.prepare_history_partitions makes a week ahead.",
        prometheus::MetricType::Gauge);
    auto outside = makeFamily(
        "idempotency_history_default_partition_rows",
        "Rows in the history table's DEFAULT partition (the statistics' live count): rows of open "
        "records kept past their day, and rows written on a day that had no partition.",
        prometheus::MetricType::Gauge);
    for (const auto& [table, f] : *state_) {
      addSample(ahead, {{"table", table}}, f.partitionedUntil);
      addSample(outside, {{"table", table}}, f.defaultRows);
    }
    out.push_back(std::move(ahead));
    out.push_back(std::move(outside));
  }

 private:
  struct Figures {
    double partitionedUntil = 0;
    double defaultRows = 0;
  };
  mutable std::mutex mutex_;
  std::optional<std::map<std::string, Figures>> state_;
};

// The history partitions collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered = registerCollector(
    {.name = "history_partitions", .order = 85, .make = [](const CollectorContext&) {
       return std::make_unique<HistoryPartitionsCollector>();
     }});

}  // namespace
}  // namespace idem::exporter

// SQL's side of the exporter suites' comparisons: the counts the exporter must publish, computed
// by SQL from the same tables, as series keys, and the comparison of a scraped family with them.
#pragma once

#include <QtTest>
#include <cstdint>
#include <functional>
#include <map>
#include <pqxx/pqxx>
#include <string>

#include "exporter_harness.hpp"
#include "idem/vocabulary.hpp"
#include "metric_keys.hpp"
#include "test_database.hpp"

namespace idem::test {

// Series key -> value.
using Truth = std::map<std::string, double>;

// SQL's counts grouped by the label columns (the last column is the count), as series keys.
inline Truth sqlCounts(const TestDatabase& db, const std::string& sql,
                       const std::function<std::string(const pqxx::row&)>& key) {
  Truth out;
  auto c = db.connect();
  pqxx::nontransaction tx(*c);
  for (const pqxx::row& r : tx.exec(sql)) out[key(r)] += r[r.size() - 1].as<double>();
  return out;
}

// The counters' truth over the rows whose id is above the given ones (0: every row), so that a
// test can add what the exporter counted before a purge to what SQL still holds after it.
struct RowsAfter {
  std::int64_t attempts = 0;
  std::int64_t fundFlows = 0;
  std::int64_t transitions = 0;
};

inline std::string idAbove(std::int64_t id) {
  return " WHERE id > " + std::to_string(id);
}

inline Truth sqlRequests(const TestDatabase& db, std::int64_t after = 0) {
  return sqlCounts(
      db,
      "SELECT biz_type, trigger_source, outcome, count(*) FROM idem.attempts" + idAbove(after) +
          " GROUP BY 1, 2, 3",
      [](const pqxx::row& r) { return requestsKey(r[0].c_str(), r[1].c_str(), r[2].c_str()); });
}
inline Truth sqlFundFlows(const TestDatabase& db, std::int64_t after = 0) {
  return sqlCounts(
      db,
      "SELECT biz_type, kind, count(*) FROM idem.fund_flows" + idAbove(after) + " GROUP BY 1, 2",
      [](const pqxx::row& r) { return fundFlowsKey(r[0].c_str(), r[1].c_str()); });
}
inline Truth sqlDuplicates(const TestDatabase& db, std::int64_t after = 0) {
  return sqlCounts(db,
                   "SELECT biz_type, kind, count(*) FROM idem.fund_flows" + idAbove(after) +
                       " AND duplicate_of IS NOT NULL GROUP BY 1, 2",
                   [](const pqxx::row& r) { return duplicatesKey(r[0].c_str(), r[1].c_str()); });
}
inline Truth sqlRecorders(const TestDatabase& db, std::int64_t after = 0) {
  return sqlCounts(db,
                   "SELECT biz_type, recorded_by, count(*) FROM idem.fund_flows" + idAbove(after) +
                       " GROUP BY 1, 2",
                   [](const pqxx::row& r) { return recordedKey(r[0].c_str(), r[1].c_str()); });
}
inline Truth sqlTransitions(const TestDatabase& db, std::int64_t after = 0) {
  return sqlCounts(
      db,
      "SELECT coalesce(from_status, 'none'), to_status, actor_kind, count(*) FROM "
      "idem.transitions" +
          idAbove(after) + " GROUP BY 1, 2, 3",
      [](const pqxx::row& r) { return transitionsKey(r[0].c_str(), r[1].c_str(), r[2].c_str()); });
}

// a + b, series by series.
inline Truth plus(Truth a, const Truth& b) {
  for (const auto& [key, v] : b) a[key] += v;
  return a;
}

// Every series of the family in the scrape equals SQL's count (0 where SQL has no row), and every
// SQL group is a series of the scrape.
inline void compareFamily(const Series& scraped, const std::string& family, const Truth& expected) {
  int seen = 0;
  for (const auto& [key, v] : scraped) {
    if (!key.starts_with(family + "{")) continue;
    ++seen;
    const auto e = expected.find(key);
    const double want = e == expected.end() ? 0.0 : e->second;
    QVERIFY2(v == want,
             (key + ": exporter " + std::to_string(v) + ", SQL " + std::to_string(want)).c_str());
  }
  for (const auto& [key, want] : expected) {
    QVERIFY2(scraped.count(key) == 1, (key + " is missing from the scrape").c_str());
  }
  QVERIFY2(seen > 0, (family + " has no series").c_str());
}

// "'replayed', 'in_progress', 'retired'": the hit ratio's outcomes as idem::isHit decides them.
inline std::string hitOutcomesSql() {
  std::string out;
  for (Outcome o : allValues<Outcome>()) {
    if (!isHit(o)) continue;
    if (!out.empty()) out += ", ";
    out += "'" + std::string(format(o)) + "'";
  }
  return out;
}

}  // namespace idem::test

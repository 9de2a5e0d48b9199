// Reading the money questions' rows (sql/migrations/012_money_questions.sql) into plain values: the
// NULLs an optional column may hold, timestamps as microseconds (IDEM_SQL_MICROS), arrays as JSON
// text.
#pragma once

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "idem/domain.hpp"

// Every biz type the ledger and the live records hold, as text[]: the console answers the money
// questions for all of them (the exporter for its --reconcile-biz-types). A loose index scan, one
// probe per distinct value, of fund_flows_by_biz and records_one_live_per_biz (SUCCESS records
// are live), so it stays cheap however many rows there are.
#define IDEM_SQL_EVERY_BIZ_TYPE                                                                  \
  "(WITH RECURSIVE flows(t) AS ("                                                                \
  " SELECT min(biz_type) FROM idem.fund_flows"                                                   \
  " UNION ALL SELECT (SELECT min(f.biz_type) FROM idem.fund_flows f WHERE f.biz_type > flows.t)" \
  " FROM flows WHERE flows.t IS NOT NULL),"                                                      \
  " live(t) AS ("                                                                                \
  " SELECT min(biz_type) FROM idem.records WHERE status <> 'FAILED'"                             \
  " UNION ALL SELECT (SELECT min(r.biz_type) FROM idem.records r"                                \
  " WHERE r.status <> 'FAILED' AND r.biz_type > live.t) FROM live WHERE live.t IS NOT NULL)"     \
  " SELECT coalesce(array_agg(DISTINCT t), '{}'::text[])"                                        \
  " FROM (SELECT t FROM flows UNION ALL SELECT t FROM live) AS u WHERE t IS NOT NULL)"

namespace idem::admin {

std::optional<std::string> optionalText(const pqxx::field& f);
std::string textOrEmpty(const pqxx::field& f);
Timestamp micros(const pqxx::field& f);
std::optional<Timestamp> optionalMicros(const pqxx::field& f);
// A JSON array (array_to_json(...)::text) of strings or numbers, each as text; NULL: empty.
std::vector<std::string> jsonArray(const pqxx::field& f);

// An interval parameter ("86400 seconds"), bound as text and cast with ::interval.
std::string intervalText(std::chrono::seconds d);

}  // namespace idem::admin

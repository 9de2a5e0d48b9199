// Reading the money questions' rows (sql/012_money_questions.sql) into plain values: the NULLs an
// optional column may hold, timestamps as microseconds (IDEM_SQL_MICROS), arrays as JSON text.
#pragma once

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "idem/domain.hpp"

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

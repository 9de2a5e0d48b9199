#include "models/sql_row.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <pqxx/pqxx>

namespace idem::admin {

std::optional<std::string> optionalText(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return std::string(f.c_str());
}

std::string textOrEmpty(const pqxx::field& f) {
  return f.is_null() ? std::string() : std::string(f.c_str());
}

Timestamp micros(const pqxx::field& f) {
  return Timestamp(std::chrono::microseconds(f.as<long long>()));
}

std::optional<Timestamp> optionalMicros(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return micros(f);
}

std::vector<std::string> jsonArray(const pqxx::field& f) {
  std::vector<std::string> out;
  if (f.is_null()) return out;
  const QJsonArray array = QJsonDocument::fromJson(QByteArray(f.c_str())).array();
  for (const auto& v : array) {
    out.push_back(v.isString() ? v.toString().toStdString()
                               : QString::number(v.toInteger()).toStdString());
  }
  return out;
}

std::string intervalText(std::chrono::seconds d) {
  return std::to_string(d.count()) + " seconds";
}

}  // namespace idem::admin

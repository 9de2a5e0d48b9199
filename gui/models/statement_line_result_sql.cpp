#include "models/statement_line_result_sql.hpp"

#include "idem/vocabulary.hpp"

namespace idem::admin {

const std::string& needsPersonResultsSql() {
  static const std::string list = [] {
    std::string out;
    for (const auto& [value, spelling] : Vocabulary<StatementLineResult>::values) {
      if (!needsPerson(value)) continue;
      out += (out.empty() ? "('" : ", '") + std::string(spelling) + "'";
    }
    return out + ")";
  }();
  return list;
}

}  // namespace idem::admin

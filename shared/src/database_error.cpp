#include "idem/database_error.hpp"

#include <pqxx/except>

namespace idem {

std::string primaryMessage(const std::string& libpqText) {
  std::string line = libpqText.substr(0, libpqText.find('\n'));
  for (const char* prefix : {"ERROR:  ", "FATAL:  ", "PANIC:  "}) {
    if (line.starts_with(prefix)) {
      line.erase(0, std::char_traits<char>::length(prefix));
      break;
    }
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

void rethrowAsDatabaseError(const char* what) {
  const std::string context = std::string(what) + ": ";
  try {
    throw;
  } catch (const pqxx::sql_error& e) {
    throw DatabaseError(e.sqlstate(), context + primaryMessage(e.what()));
  } catch (const pqxx::broken_connection& e) {
    throw DatabaseError("08006", context + "lost the database connection (" +
                                     primaryMessage(e.what()) + ")");
  } catch (const pqxx::in_doubt_error& e) {
    throw DatabaseError("08007", context + "the connection broke during commit; the outcome is unknown (" +
                                     primaryMessage(e.what()) + ")");
  } catch (const pqxx::failure& e) {
    throw DatabaseError("", context + primaryMessage(e.what()));
  }
}

}  // namespace idem

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

DatabaseErrorKind classifySqlstate(const std::string& s) noexcept {
  if (s.starts_with("08") || s == "57P01" || s == "57P02" || s == "57P03" || s == "57P05") {
    return DatabaseErrorKind::ConnectionLost;
  }
  if (s == "28P01") return DatabaseErrorKind::NeedsPassword;
  if (s == "57014") return DatabaseErrorKind::QueryCancelled;
  if (s.starts_with("40") && s != "40003") return DatabaseErrorKind::Serialization;
  if (s.starts_with("23")) return DatabaseErrorKind::Constraint;
  return DatabaseErrorKind::Other;
}

namespace {

// libpq reports a failed connection attempt as text only, with no SQLSTATE: these are the two
// ways it says that a password is needed (libpq's fe-auth.c and the server's auth.c).
bool saysPasswordNeeded(const std::string& text) {
  return text.find("no password supplied") != std::string::npos ||
         text.find("password authentication failed") != std::string::npos;
}

// libpqxx 6.4 throws a class per error category but does not always fill in the SQLSTATE; the
// class tells it back where the state is missing.
std::string sqlstateOf(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  const auto is = [&](auto* type) { return dynamic_cast<decltype(type)>(&e) != nullptr; };
  if (is(static_cast<const pqxx::insufficient_privilege*>(nullptr))) return "42501";
  if (is(static_cast<const pqxx::unique_violation*>(nullptr))) return "23505";
  if (is(static_cast<const pqxx::check_violation*>(nullptr))) return "23514";
  if (is(static_cast<const pqxx::not_null_violation*>(nullptr))) return "23502";
  if (is(static_cast<const pqxx::foreign_key_violation*>(nullptr))) return "23503";
  if (is(static_cast<const pqxx::integrity_constraint_violation*>(nullptr))) return "23000";
  if (is(static_cast<const pqxx::undefined_table*>(nullptr))) return "42P01";
  if (is(static_cast<const pqxx::undefined_function*>(nullptr))) return "42883";
  if (is(static_cast<const pqxx::undefined_column*>(nullptr))) return "42703";
  if (is(static_cast<const pqxx::syntax_error*>(nullptr))) return "42601";
  if (is(static_cast<const pqxx::data_exception*>(nullptr))) return "22000";
  if (is(static_cast<const pqxx::out_of_memory*>(nullptr))) return "53200";
  if (is(static_cast<const pqxx::disk_full*>(nullptr))) return "53100";
  if (is(static_cast<const pqxx::insufficient_resources*>(nullptr))) return "53000";
  if (is(static_cast<const pqxx::feature_not_supported*>(nullptr))) return "0A000";
  if (is(static_cast<const pqxx::plpgsql_raise*>(nullptr))) return "P0001";
  return "";
}

}  // namespace

std::string connectFailureSqlstate(const std::string& libpqText) {
  return saysPasswordNeeded(libpqText) ? "28P01" : "08001";
}

DatabaseError serverError(const char* what, const std::string& sqlstate,
                          const std::string& libpqText, std::string routine) {
  std::string message = std::string(what) + ": " + primaryMessage(libpqText);
  // A function or relation of the schema that is not there: the database is older than this
  // program. Say what to do rather than leave the operator with PostgreSQL's words alone.
  if ((sqlstate == "42883" || sqlstate == "42P01") && message.find("idem.") != std::string::npos) {
    message += " (the idem schema is older than this program: run `idemctl migrate`)";
  }
  return DatabaseError(sqlstate, message, std::move(routine));
}

void rethrowAsDatabaseError(const char* what) {
  const std::string context = std::string(what) + ": ";
  try {
    throw;
  } catch (const pqxx::sql_error& e) {
    throw serverError(what, sqlstateOf(e), e.what());
  } catch (const pqxx::serialization_failure& e) {
    throw DatabaseError("40001", context + primaryMessage(e.what()));
  } catch (const pqxx::deadlock_detected& e) {
    throw DatabaseError("40P01", context + primaryMessage(e.what()));
  } catch (const pqxx::statement_completion_unknown& e) {
    throw DatabaseError("40003", context + primaryMessage(e.what()));
  } catch (const pqxx::transaction_rollback& e) {
    throw DatabaseError("40000", context + primaryMessage(e.what()));
  } catch (const pqxx::broken_connection& e) {
    if (saysPasswordNeeded(e.what())) {
      throw DatabaseError("28P01", context + primaryMessage(e.what()));
    }
    throw DatabaseError(
        "08006", context + "lost the database connection (" + primaryMessage(e.what()) + ")");
  } catch (const pqxx::in_doubt_error& e) {
    throw DatabaseError("08007",
                        context + "the connection broke during commit; the outcome is unknown (" +
                            primaryMessage(e.what()) + ")");
  } catch (const pqxx::failure& e) {
    throw DatabaseError("", context + primaryMessage(e.what()));
  }
}

std::optional<DatabaseError> asDatabaseError(const std::exception_ptr& error, const char* what) {
  try {
    try {
      std::rethrow_exception(error);
    } catch (const DatabaseError&) {
      throw;
    } catch (const pqxx::failure&) {
      rethrowAsDatabaseError(what);
    }
  } catch (const DatabaseError& e) {
    return e;
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace idem

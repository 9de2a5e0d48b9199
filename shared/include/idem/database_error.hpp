// Errors from the database, translated once: every component shows the same readable message and
// can branch on the SQLSTATE (23505 unique violation, 22023 invalid parameter, 08xxx
// connection...).
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace idem {

// What a caller does about an error, decided here once for the exporter, the GUI and idemctl.
enum class DatabaseErrorKind {
  ConnectionLost,  // the session is over (class 08, or the server ending it: 57P01/02/03/05);
                   // whatever was in flight may or may not have run
  NeedsPassword,   // the server wants a password we lack or refused it (28P01):
                   // retrying cannot help until a person supplies one
  QueryCancelled,  // statement_timeout or a cancel request (57014): the session is still fine
  Serialization,   // serialization failure or deadlock (class 40 except 40003): safe to retry
  Constraint,      // class 23: the database refused the data
  Other,
};

DatabaseErrorKind classifySqlstate(const std::string& sqlstate) noexcept;

class DatabaseError : public std::runtime_error {
 public:
  DatabaseError(std::string sqlstate, const std::string& message, std::string routine = {})
      : std::runtime_error(message),
        sqlstate_(std::move(sqlstate)),
        routine_(std::move(routine)),
        kind_(classifySqlstate(sqlstate_)) {}

  // Five characters, or "08006" when the connection was lost, "28P01" when a password is
  // missing or wrong, "" when unknown.
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  DatabaseErrorKind kind() const noexcept { return kind_; }
  // The server's function that raised it (libpq's PG_DIAG_SOURCE_FUNCTION), whatever the
  // language of its message: "" when unknown (libpqxx does not pass it on).
  const std::string& routine() const noexcept { return routine_; }
  // The session cannot be used any more: reconnect (or, for a password, ask a person).
  bool endsSession() const noexcept {
    return kind_ == DatabaseErrorKind::ConnectionLost || kind_ == DatabaseErrorKind::NeedsPassword;
  }
  bool isConnectionLoss() const noexcept { return kind_ == DatabaseErrorKind::ConnectionLost; }

 private:
  std::string sqlstate_;
  std::string routine_;
  DatabaseErrorKind kind_;
};

// The first line of a libpq error text without its "ERROR:  " prefix, so messages read as
// sentences.
std::string primaryMessage(const std::string& libpqText);

// What the server answered a statement with (its SQLSTATE, libpq's error text and the server's
// routine that raised it), as the DatabaseError every component shows: for callers that speak
// libpq without libpqxx.
DatabaseError serverError(const char* what, const std::string& sqlstate,
                          const std::string& libpqText, std::string routine = {});

// Runs fn and rethrows libpqxx's exceptions as DatabaseError. What the function does is the context
// of the message ("settle: ..."), so a user reads what failed and why in one line.
template <typename Fn>
decltype(auto) translatingErrors(const char* what, Fn&& fn);

[[noreturn]] void rethrowAsDatabaseError(const char* what);

// A failed connection attempt carries no SQLSTATE, only libpq's text: "28P01" when that text says
// a password is missing or was refused, else "08001" (cannot connect).
std::string connectFailureSqlstate(const std::string& libpqText);

// The in-flight exception (any type) as a DatabaseError, or nullopt when it is not a database
// error at all: for callers that hold an exception_ptr, like the exporter's collection loop.
std::optional<DatabaseError> asDatabaseError(const std::exception_ptr& error, const char* what);

template <typename Fn>
decltype(auto) translatingErrors(const char* what, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const DatabaseError&) {
    throw;
  } catch (...) {
    rethrowAsDatabaseError(what);
  }
}

}  // namespace idem

// Errors from the database, translated once: every component shows the same readable message and
// can branch on the SQLSTATE (23505 unique violation, 22023 invalid parameter, 08xxx
// connection...).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace idem {

class DatabaseError : public std::runtime_error {
 public:
  DatabaseError(std::string sqlstate, const std::string& message)
      : std::runtime_error(message), sqlstate_(std::move(sqlstate)) {}

  // Five characters, or "08006" when the connection was lost, "" when unknown.
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  // Class 08: the connection is gone; the operation may or may not have run.
  bool isConnectionLoss() const noexcept { return sqlstate_.starts_with("08"); }

 private:
  std::string sqlstate_;
};

// The first line of a libpq error text without its "ERROR:  " prefix, so messages read as
// sentences.
std::string primaryMessage(const std::string& libpqText);

// Runs fn and rethrows libpqxx's exceptions as DatabaseError. What the function does is the context
// of the message ("settle: ..."), so a user reads what failed and why in one line.
template <typename Fn>
decltype(auto) translatingErrors(const char* what, Fn&& fn);

[[noreturn]] void rethrowAsDatabaseError(const char* what);

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

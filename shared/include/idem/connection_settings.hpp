// Where the database is: --db.dsn, else IDEMWATCH_DSN, else libpq's own environment (PGHOST,
// PGPORT, PGUSER, ~/.pgpass ...). Every idemwatch program resolves it the same way.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <string_view>

namespace idem {

struct ConnectionSettings {
  std::string dsn;     // "" means: libpq's environment alone
  std::string source;  // "--db.dsn", "IDEMWATCH_DSN" or "libpq environment", for messages
  std::chrono::seconds connectTimeout{5};
  std::chrono::milliseconds statementTimeout{0};  // 0: none
  std::string applicationName = "idemwatch";

  // The flag wins, then IDEMWATCH_DSN, then nothing (libpq reads PG* variables itself).
  static ConnectionSettings resolve(const std::optional<std::string>& dsnFlag);

  // The DSN with connect_timeout, application_name and statement_timeout added where the user did
  // not set them. Works for both key=value strings and postgresql:// URIs.
  std::string effectiveDsn() const;

  // The DSN with any password masked, for logs and error messages.
  std::string redacted() const;
};

// Opens a connection; throws DatabaseError naming where it tried to connect and why it failed.
std::unique_ptr<pqxx::connection> connect(const ConnectionSettings& settings);

}  // namespace idem

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
  // 0: none. Set per transaction by the thread that owns the connection (StatementTimeoutScope in
  // idem/bounded_transaction.hpp), never at connect: PgBouncer refuses the `options` parameter.
  std::chrono::milliseconds statementTimeout{0};
  std::string applicationName = "idemwatch";

  // The flag wins, then IDEMWATCH_DSN, then nothing (libpq reads PG* variables itself).
  static ConnectionSettings resolve(const std::optional<std::string>& dsnFlag);

  // The DSN with connect_timeout and application_name added where the user did not set them. Works
  // for both key=value strings and postgresql:// URIs.
  std::string effectiveDsn() const;

  // The DSN with any password masked, for logs and error messages.
  std::string redacted() const;
};

// Opens a connection; throws DatabaseError naming where it tried to connect and why it failed.
std::unique_ptr<pqxx::connection> connect(const ConnectionSettings& settings);

// Whether the server session behind `connection` may serve other clients between transactions,
// as behind PgBouncer in transaction or statement mode: then nothing may be left in the session.
bool sessionIsShared(pqxx::connection& connection);
// The same, asked within a transaction already open on it.
bool sessionIsShared(pqxx::transaction_base& tx);

}  // namespace idem

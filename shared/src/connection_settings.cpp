#include "idem/connection_settings.hpp"

#include <libpq-fe.h>

#include <cstdlib>
#include <pqxx/connection>
#include <pqxx/except>
#include <pqxx/nontransaction>

#include "idem/database_error.hpp"

namespace idem {
namespace {

bool isUri(std::string_view dsn) {
  return dsn.starts_with("postgresql://") || dsn.starts_with("postgres://");
}

bool mentions(std::string_view dsn, std::string_view key) {
  // Good enough for both forms: "key=" in a key/value string or in a URI query.
  return dsn.find(std::string(key) + "=") != std::string_view::npos;
}

void addParameter(std::string& dsn, std::string_view key, const std::string& value) {
  if (mentions(dsn, key)) return;
  if (isUri(dsn)) {
    dsn += (dsn.find('?') == std::string::npos) ? '?' : '&';
    dsn += std::string(key) + "=" + value;
  } else {
    if (!dsn.empty()) dsn += ' ';
    dsn += std::string(key) + "='" + value + "'";
  }
}

}  // namespace

ConnectionSettings ConnectionSettings::resolve(const std::optional<std::string>& dsnFlag) {
  ConnectionSettings s;
  if (dsnFlag) {
    s.dsn = *dsnFlag;
    s.source = "--db.dsn";
  } else if (const char* env = std::getenv("IDEMWATCH_DSN"); env != nullptr && *env != '\0') {
    s.dsn = env;
    s.source = "IDEMWATCH_DSN";
  } else {
    s.source = "libpq environment";
  }
  return s;
}

std::string ConnectionSettings::effectiveDsn() const {
  std::string out = dsn;
  if (!mentions(out, "connect_timeout") && std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    addParameter(out, "connect_timeout", std::to_string(connectTimeout.count()));
  }
  if (std::getenv("PGAPPNAME") == nullptr) addParameter(out, "application_name", applicationName);
  return out;
}

namespace {

// A value as libpq reads it back in a key=value string: quoted when it is empty or holds a space,
// a quote or a backslash, with those escaped.
std::string quotedValue(std::string_view value) {
  const bool plain = !value.empty() && value.find_first_of(" \t\n'\\") == std::string_view::npos;
  if (plain) return std::string(value);
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

// The connection string as libpq itself parses it (both forms, every quoting rule), written back
// as key=value pairs with the password replaced: what the string says, and never the secret in
// it, whatever the spelling. A string libpq cannot parse is not shown at all: its error says why.
std::string ConnectionSettings::redacted() const {
  if (dsn.empty()) return "(libpq environment)";
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    if (error != nullptr) PQfreemem(error);
    return "(a connection string libpq cannot parse)";
  }
  std::string out;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (!out.empty()) out += ' ';
    out += o->keyword;
    out += '=';
    const bool secret = std::string_view(o->dispchar) == "*";  // libpq's mark for a password
    out += secret ? std::string("***") : quotedValue(o->val);
  }
  PQconninfoFree(options);
  return out.empty() ? "(libpq environment)" : out;
}

bool sessionIsShared(pqxx::transaction_base& tx) {
  // A pooler answers the startup itself and hands the client a backend key of its own making
  // (PgBouncer: random bytes), so the pid the client was told is not the server's.
  return tx.exec1("SELECT pg_catalog.pg_backend_pid()")[0].as<int>() != tx.conn().backendpid();
}

bool sessionIsShared(pqxx::connection& connection) {
  pqxx::nontransaction tx(connection);
  return sessionIsShared(tx);
}

std::unique_ptr<pqxx::connection> connect(const ConnectionSettings& settings) {
  try {
    return std::make_unique<pqxx::connection>(settings.effectiveDsn());
  } catch (const pqxx::failure& e) {
    throw DatabaseError(connectFailureSqlstate(e.what()),
                        "cannot connect to the database " + settings.redacted() + " (from " +
                            settings.source + "): " + primaryMessage(e.what()));
  }
}

}  // namespace idem

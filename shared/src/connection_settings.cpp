#include "idem/connection_settings.hpp"

#include <cstdlib>
#include <pqxx/connection>
#include <pqxx/except>
#include <pqxx/nontransaction>
#include <regex>

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

std::string ConnectionSettings::redacted() const {
  static const std::regex keyValue(R"((password\s*=\s*)('[^']*'|\S+))", std::regex::icase);
  static const std::regex uriPassword(R"((://[^:/@]+:)[^@]*@)");
  std::string out = std::regex_replace(dsn, keyValue, "$1***");
  out = std::regex_replace(out, uriPassword, "$1***@");
  return out.empty() ? "(libpq environment)" : out;
}

bool sessionIsShared(pqxx::connection& connection) {
  // A pooler answers the startup itself and hands the client a backend key of its own making
  // (PgBouncer: random bytes), so the pid the client was told is not the server's.
  pqxx::nontransaction tx(connection);
  return tx.exec1("SELECT pg_catalog.pg_backend_pid()")[0].as<int>() != connection.backendpid();
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

#include "idem/connection_settings.hpp"

#include <cstdlib>
#include <pqxx/connection>
#include <pqxx/except>
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
  if (statementTimeout.count() > 0 && !mentions(out, "options")) {
    const std::string value = "-c statement_timeout=" + std::to_string(statementTimeout.count());
    if (isUri(out)) {
      addParameter(out, "options",
                   "-c%20statement_timeout%3D" + std::to_string(statementTimeout.count()));
    } else {
      addParameter(out, "options", value);
    }
  }
  return out;
}

std::string ConnectionSettings::redacted() const {
  static const std::regex keyValue(R"((password\s*=\s*)('[^']*'|\S+))", std::regex::icase);
  static const std::regex uriPassword(R"((://[^:/@]+:)[^@]*@)");
  std::string out = std::regex_replace(dsn, keyValue, "$1***");
  out = std::regex_replace(out, uriPassword, "$1***@");
  return out.empty() ? "(libpq environment)" : out;
}

std::unique_ptr<pqxx::connection> connect(const ConnectionSettings& settings) {
  try {
    return std::make_unique<pqxx::connection>(settings.effectiveDsn());
  } catch (const pqxx::failure& e) {
    // The one classification decides: a refused or missing password is NeedsPassword (28P01),
    // anything else about reaching the server is a connection that never started (08001).
    const std::optional<DatabaseError> translated =
        asDatabaseError(std::current_exception(), "connect");
    const bool password = translated && translated->kind() == DatabaseErrorKind::NeedsPassword;
    throw DatabaseError(password ? translated->sqlstate() : std::string("08001"),
                        "cannot connect to the database " + settings.redacted() + " (from " +
                            settings.source + "): " + primaryMessage(e.what()));
  }
}

}  // namespace idem

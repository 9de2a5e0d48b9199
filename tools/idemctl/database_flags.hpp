// The flag every database-facing subcommand shares, and how it becomes ConnectionSettings.
#pragma once

#include <optional>
#include <string>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"

namespace idem::ctl {

inline void declareDsn(CommandLine& cli, std::optional<std::string>& dsn) {
  cli.text("db.dsn", "DSN",
           "libpq connection string or URI (default: IDEMWATCH_DSN, then PG* variables)", dsn);
}

inline ConnectionSettings connectionFrom(const std::optional<std::string>& dsn,
                                         const std::string& application) {
  ConnectionSettings s = ConnectionSettings::resolve(dsn);
  s.applicationName = application;
  return s;
}

}  // namespace idem::ctl

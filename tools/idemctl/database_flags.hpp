// The flags every database-facing subcommand shares, and how they become ConnectionSettings.
#pragma once

#include <string>
#include <vector>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"

namespace idem::ctl {

inline FlagSpec dsnFlag() {
  return {"db.dsn", true, "DSN",
          "libpq connection string or URI (default: IDEMWATCH_DSN, then PG* variables)"};
}
inline FlagSpec helpFlag() {
  return {"help", false, "", "describe this command's flags"};
}

inline ConnectionSettings connectionFrom(const CommandLine& cli, const std::string& application) {
  ConnectionSettings s = ConnectionSettings::resolve(cli.value("db.dsn"));
  s.applicationName = application;
  return s;
}

}  // namespace idem::ctl

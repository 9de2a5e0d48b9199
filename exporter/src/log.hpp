// One line per event on stderr: "2024-05-01T10:00:00.123Z level=warn msg=...". The exporter runs
// under systemd or a container runtime, both of which collect stderr line by line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace idem::exporter {

enum class LogLevel { Debug, Info, Warn, Error };

std::optional<LogLevel> parseLogLevel(std::string_view text);

// Process-wide, because log lines come from the web server's threads as well as the collection
// thread. Thread-safe.
void setLogLevel(LogLevel level);
bool logEnabled(LogLevel level);
void log(LogLevel level, std::string_view message);

inline void logDebug(std::string_view m) {
  log(LogLevel::Debug, m);
}
inline void logInfo(std::string_view m) {
  log(LogLevel::Info, m);
}
inline void logWarn(std::string_view m) {
  log(LogLevel::Warn, m);
}
inline void logError(std::string_view m) {
  log(LogLevel::Error, m);
}

}  // namespace idem::exporter

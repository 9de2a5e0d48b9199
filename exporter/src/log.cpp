#include "log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace idem::exporter {
namespace {

std::atomic<LogLevel> threshold{LogLevel::Info};
std::mutex writeMutex;

const char* spelling(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Info:
      return "info";
    case LogLevel::Warn:
      return "warn";
    case LogLevel::Error:
      return "error";
  }
  return "?";
}

}  // namespace

std::optional<LogLevel> parseLogLevel(std::string_view text) {
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error}) {
    if (text == spelling(l)) return l;
  }
  return std::nullopt;
}

void setLogLevel(LogLevel level) {
  threshold = level;
}

bool logEnabled(LogLevel level) {
  return level >= threshold.load();
}

void log(LogLevel level, std::string_view message) {
  if (!logEnabled(level)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  // A multi-line message (a libpq error with DETAIL) stays on one line.
  std::string oneLine(message);
  for (char& c : oneLine) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::lock_guard lock(writeMutex);
  std::fprintf(stderr, "%s.%03dZ level=%s msg=%s\n", stamp, static_cast<int>(millis),
               spelling(level), oneLine.c_str());
}

}  // namespace idem::exporter

// Inside the statement reader: one function per format, and the date handling they share.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "idem/statement_formats.hpp"

namespace idem::statements {

using LineSink = std::function<void(StatementLine&&)>;

std::optional<StatementPeriod> readStripeItemized(const std::string& path,
                                                  const StatementOptions& options,
                                                  const LineSink& onLine);
std::optional<StatementPeriod> readCamt(const std::string& path, StatementFormat format,
                                        const StatementOptions& options, const LineSink& onLine);
std::optional<StatementPeriod> readAdyenSettlement(const std::string& path,
                                                   const StatementOptions& options,
                                                   const LineSink& onLine);
std::optional<StatementPeriod> readMappedCsv(const std::string& path,
                                             const StatementOptions& options,
                                             const LineSink& onLine);

// A calendar date and a wall-clock time, checked (a real day of a real month, 00:00:00 to
// 23:59:60).
struct CivilTime {
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  bool hasTime = false;
};

// `text` read whole by a strptime-like `format`: %Y (four digits), %m, %d, %H, %M, %S (two
// digits), %% and literal characters. None when it does not match or is not a real date.
std::optional<CivilTime> parseCivilTime(std::string_view text, std::string_view format);
// "YYYY-MM-DD".
std::string formatDate(const CivilTime& t);
// "YYYY-MM-DDTHH:MM:SS" followed by `zone` ("Z", "+08:00").
std::string formatDateTime(const CivilTime& t, std::string_view zone);
// "Z" for an offset of zero, else "+HH:MM" / "-HH:MM"; none for text that is not one of "Z",
// "UTC", "+HH:MM", "-HH:MM", "+HHMM", "+HH".
std::optional<std::string> normaliseZone(std::string_view zone);

}  // namespace idem::statements

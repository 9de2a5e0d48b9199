#include "idem/statement_formats.hpp"

#include <array>
#include <cstdio>

#include "statements/statement_readers.hpp"

namespace idem {
namespace {

struct FormatName {
  StatementFormat format;
  std::string_view name;
};

constexpr std::array<FormatName, 5> kFormatNames{{
    {StatementFormat::StripeItemized, "stripe"},
    {StatementFormat::Camt053, "camt.053"},
    {StatementFormat::Camt054, "camt.054"},
    {StatementFormat::AdyenSettlement, "adyen"},
    {StatementFormat::MappedCsv, "csv"},
}};

std::string located(const std::string& file, std::uint64_t line, std::uint64_t column,
                    const std::string& problem) {
  if (line == 0) return file + ": " + problem;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + problem;
}

}  // namespace

std::optional<StatementFormat> statementFormatFromName(std::string_view name) {
  for (const FormatName& f : kFormatNames) {
    if (f.name == name) return f.format;
  }
  return std::nullopt;
}

std::string_view statementFormatName(StatementFormat format) {
  for (const FormatName& f : kFormatNames) {
    if (f.format == format) return f.name;
  }
  return "unknown";
}

std::string statementFormatNames() {
  std::string names;
  for (const FormatName& f : kFormatNames) {
    if (!names.empty()) names += ", ";
    names += f.name;
  }
  return names;
}

StatementError::StatementError(const std::string& file, std::uint64_t line, std::uint64_t column,
                               const std::string& problem)
    : std::runtime_error(located(file, line, column, problem)),
      line_(line),
      column_(column),
      problem_(problem) {}

std::optional<StatementPeriod> readStatement(const std::string& path, StatementFormat format,
                                             const StatementOptions& options,
                                             const std::function<void(StatementLine&&)>& onLine) {
  switch (format) {
    case StatementFormat::StripeItemized:
      return statements::readStripeItemized(path, options, onLine);
    case StatementFormat::Camt053:
    case StatementFormat::Camt054:
      return statements::readCamt(path, format, options, onLine);
    case StatementFormat::AdyenSettlement:
      return statements::readAdyenSettlement(path, options, onLine);
    case StatementFormat::MappedCsv:
      return statements::readMappedCsv(path, options, onLine);
  }
  throw StatementError(path, 0, 0, "unknown statement format");
}

namespace statements {
namespace {

bool leapYear(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int daysInMonth(int y, int m) {
  constexpr std::array<int, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leapYear(y) ? 29 : kDays[static_cast<std::size_t>(m - 1)];
}

// `count` digits at text[pos], advancing pos; false when they are not all digits.
bool digits(std::string_view text, std::size_t& pos, std::size_t count, int& value) {
  if (pos + count > text.size()) return false;
  value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const char ch = text[pos + i];
    if (ch < '0' || ch > '9') return false;
    value = value * 10 + (ch - '0');
  }
  pos += count;
  return true;
}

// `value` as `count` decimal digits at text[pos] (the year is 0 to 9999: four digits parsed).
void putDigits(std::string& text, std::size_t pos, int value, std::size_t count) {
  for (std::size_t i = count; i > 0; --i) {
    text[pos + i - 1] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

}  // namespace

std::optional<CivilTime> parseCivilTime(std::string_view text, std::string_view format) {
  CivilTime t;
  bool hasDate = false;
  std::size_t pos = 0;
  for (std::size_t f = 0; f < format.size(); ++f) {
    if (format[f] != '%' || f + 1 == format.size()) {
      if (pos >= text.size() || text[pos] != format[f]) return std::nullopt;
      ++pos;
      continue;
    }
    bool ok = true;
    switch (format[++f]) {
      case 'Y':
        ok = digits(text, pos, 4, t.year);
        hasDate = true;
        break;
      case 'm':
        ok = digits(text, pos, 2, t.month);
        break;
      case 'd':
        ok = digits(text, pos, 2, t.day);
        break;
      case 'H':
        ok = digits(text, pos, 2, t.hour);
        t.hasTime = true;
        break;
      case 'M':
        ok = digits(text, pos, 2, t.minute);
        break;
      case 'S':
        ok = digits(text, pos, 2, t.second);
        break;
      case '%':
        ok = pos < text.size() && text[pos++] == '%';
        break;
      default:
        return std::nullopt;
    }
    if (!ok) return std::nullopt;
  }
  if (pos != text.size() || !hasDate) return std::nullopt;
  if (t.month < 1 || t.month > 12 || t.day < 1 || t.day > daysInMonth(t.year, t.month)) {
    return std::nullopt;
  }
  if (t.hour > 23 || t.minute > 59 || t.second > 60) return std::nullopt;
  return t;
}

// Written by hand rather than with snprintf: a statement has one or two per line, and a large
// file has millions of lines.
std::string formatDate(const CivilTime& t) {
  std::string text(10, '0');
  putDigits(text, 0, t.year, 4);
  text[4] = '-';
  putDigits(text, 5, t.month, 2);
  text[7] = '-';
  putDigits(text, 8, t.day, 2);
  return text;
}

std::string formatDateTime(const CivilTime& t, std::string_view zone) {
  std::string text = formatDate(t);
  text.resize(19, '0');
  text[10] = 'T';
  putDigits(text, 11, t.hour, 2);
  text[13] = ':';
  putDigits(text, 14, t.minute, 2);
  text[16] = ':';
  putDigits(text, 17, t.second, 2);
  text += zone;
  return text;
}

std::optional<std::string> normaliseZone(std::string_view zone) {
  if (zone == "Z" || zone == "UTC") return std::string("Z");
  if (zone.size() < 3 || (zone[0] != '+' && zone[0] != '-')) return std::nullopt;
  std::size_t pos = 1;
  int hours = 0;
  int minutes = 0;
  if (!digits(zone, pos, 2, hours)) return std::nullopt;
  if (pos < zone.size() && zone[pos] == ':') ++pos;
  if (pos < zone.size() && !digits(zone, pos, 2, minutes)) return std::nullopt;
  if (pos != zone.size() || hours > 14 || minutes > 59) return std::nullopt;
  if (hours == 0 && minutes == 0) return std::string("Z");
  std::array<char, 8> out{};
  std::snprintf(out.data(), out.size(), "%c%02d:%02d", zone[0], hours, minutes);
  return std::string(out.data());
}

}  // namespace statements
}  // namespace idem

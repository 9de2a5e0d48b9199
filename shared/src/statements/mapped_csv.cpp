// Any other gateway's CSV, read through a YAML mapping that names which of the file's columns
// feeds which field (docs/statements.md describes the keys). Made for the Chinese wallets' daily
// bills: GBK text, a backtick before every value, a summary block after the data.
#include <iconv.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>

#include "csv_reader.hpp"
#include "idem/currencies.hpp"
#include "statement_readers.hpp"

namespace idem::statements {
namespace {

enum Role : std::size_t {
  kLineId,
  kGatewayRef,
  kIdempotencyKey,
  kBizId,
  kAmount,
  kCurrency,
  kFee,
  kBookedAt,
  kValueDate,
  kCategory,
  kRoleCount
};

constexpr std::array<std::string_view, kRoleCount> kRoleNames{
    "line_id",  "gateway_ref", "idempotency_key", "biz_id",     "amount",
    "currency", "fee",         "booked_at",       "value_date", "category"};

constexpr std::array<std::string_view, 4> kKinds{"DEBIT", "CAPTURE", "REFUND", "CREDIT"};

constexpr std::array<std::string_view, 12> kTopKeys{
    "encoding", "delimiter",         "comment_prefix", "skip_lines",
    "stop_at",  "strip_prefix",      "currency",       "booked_at_format",
    "timezone", "value_date_format", "columns",        "kinds"};

struct ColumnSpec {
  std::string name;  // the file's header name; empty: not mapped
  YAML::Mark mark;
  std::optional<std::size_t> index;  // in the header, once read
};

using Columns = std::array<ColumnSpec, kRoleCount>;

struct KindSpec {
  std::optional<std::string> kind;
  Columns columns;  // overrides of the mapping's columns for lines of this category
};

struct Mapping {
  std::string file;
  CsvDialect dialect;
  std::size_t skipLines = 0;
  std::string stopAt;
  std::string currency;
  std::string bookedAtFormat = "%Y-%m-%d %H:%M:%S";
  std::string valueDateFormat = "%Y-%m-%d";
  std::string zone;
  Columns columns;
  YAML::Mark columnsMark;
  std::map<std::string, KindSpec, std::less<>> kinds;
};

[[noreturn]] void mappingError(const std::string& file, const YAML::Mark& mark,
                               const std::string& problem) {
  if (mark.is_null()) throw StatementError(file, 0, 0, problem);
  throw StatementError(file, static_cast<std::uint64_t>(mark.line) + 1,
                       static_cast<std::uint64_t>(mark.column) + 1, problem);
}

std::string scalar(const std::string& file, const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) mappingError(file, node.Mark(), std::string(key) + ": expected a text");
  return node.Scalar();
}

template <std::size_t N>
std::string joined(const std::array<std::string_view, N>& names) {
  std::string text;
  for (std::string_view n : names) {
    if (!text.empty()) text += ", ";
    text += n;
  }
  return text;
}

bool timeFormatIsValid(std::string_view format, bool& hasTime) {
  hasTime = false;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (i + 1 == format.size()) return false;
    const char c = format[++i];
    if (c == 'H') hasTime = true;
    if (std::string_view("YmdHMS%").find(c) == std::string_view::npos) return false;
  }
  return format.find("%Y") != std::string_view::npos;
}

Columns readColumns(const std::string& file, const YAML::Node& node, std::string_view where) {
  Columns columns;
  if (!node.IsMap()) mappingError(file, node.Mark(), std::string(where) + ": expected a mapping");
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    std::size_t role = kRoleCount;
    for (std::size_t r = 0; r < kRoleCount; ++r) {
      if (kRoleNames[r] == key) role = r;
    }
    if (role == kRoleCount) {
      mappingError(
          file, entry.first.Mark(),
          std::string(where) + ": unknown field '" + key + "' (known: " + joined(kRoleNames) + ")");
    }
    columns[role].name = scalar(file, entry.second, std::string(where) + "." + key);
    columns[role].mark = entry.second.Mark();
    if (columns[role].name.empty()) {
      mappingError(file, entry.second.Mark(), std::string(where) + "." + key + ": empty");
    }
  }
  return columns;
}

Mapping loadMapping(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw StatementError(file, 0, 0, "cannot open the mapping file");
  } catch (const YAML::ParserException& e) {
    mappingError(file, e.mark, "not valid YAML: " + e.msg);
  }
  Mapping m;
  m.file = file;
  if (!root.IsMap()) mappingError(file, root.Mark(), "the mapping file is not a YAML mapping");
  try {
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
        mappingError(file, entry.first.Mark(),
                     "unknown key '" + key + "' (known: " + joined(kTopKeys) + ")");
      }
    }
    if (const YAML::Node n = root["encoding"]) {
      m.dialect.encoding = scalar(file, n, "encoding");
      const std::string& enc = m.dialect.encoding;
      iconv_t cd = iconv_open("UTF-8", enc.c_str());
      if (iconvFailed(cd)) {
        mappingError(file, n.Mark(), "encoding: '" + enc + "' is not an encoding iconv knows");
      }
      iconv_close(cd);
    }
    if (const YAML::Node n = root["delimiter"]) {
      const std::string d = scalar(file, n, "delimiter");
      if (d.size() != 1) mappingError(file, n.Mark(), "delimiter: expected one character");
      m.dialect.delimiter = d[0];
    }
    if (const YAML::Node n = root["comment_prefix"]) {
      m.dialect.commentPrefix = scalar(file, n, "comment_prefix");
    }
    if (const YAML::Node n = root["strip_prefix"]) {
      m.dialect.stripPrefix = scalar(file, n, "strip_prefix");
    }
    if (const YAML::Node n = root["skip_lines"]) {
      const int lines = n.as<int>();
      if (lines < 0) mappingError(file, n.Mark(), "skip_lines: expected 0 or more");
      m.skipLines = static_cast<std::size_t>(lines);
    }
    if (const YAML::Node n = root["stop_at"]) m.stopAt = scalar(file, n, "stop_at");
    if (const YAML::Node n = root["currency"]) {
      m.currency = scalar(file, n, "currency");
      for (char& ch : m.currency)
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      if (!isIso4217(m.currency)) {
        mappingError(file, n.Mark(),
                     "currency: '" + n.Scalar() + "' is not an ISO 4217 currency code");
      }
    }
    bool hasTime = false;
    if (const YAML::Node n = root["booked_at_format"]) {
      m.bookedAtFormat = scalar(file, n, "booked_at_format");
    }
    if (!timeFormatIsValid(m.bookedAtFormat, hasTime)) {
      mappingError(file, root["booked_at_format"].Mark(),
                   "booked_at_format: '" + m.bookedAtFormat +
                       "' is not a format of %Y, %m, %d, %H, %M, %S and literal text");
    }
    if (const YAML::Node n = root["value_date_format"]) {
      m.valueDateFormat = scalar(file, n, "value_date_format");
      bool unused = false;
      if (!timeFormatIsValid(m.valueDateFormat, unused)) {
        mappingError(file, n.Mark(),
                     "value_date_format: '" + m.valueDateFormat +
                         "' is not a format of %Y, %m, %d, %H, %M, %S and literal text");
      }
    }
    if (const YAML::Node n = root["timezone"]) {
      const std::optional<std::string> zone = normaliseZone(scalar(file, n, "timezone"));
      if (!zone) {
        mappingError(file, n.Mark(),
                     "timezone: '" + n.Scalar() + "' is not Z, UTC or an offset such as +08:00");
      }
      m.zone = *zone;
    }

    const YAML::Node columns = root["columns"];
    if (!columns) mappingError(file, root.Mark(), "no 'columns' key: the mapping needs one");
    m.columnsMark = columns.Mark();
    m.columns = readColumns(file, columns, "columns");
    for (const Role role : {kLineId, kAmount, kCategory}) {
      if (m.columns[role].name.empty()) {
        mappingError(file, columns.Mark(),
                     "columns: no '" + std::string(kRoleNames[role]) + "', which is required");
      }
    }
    if (m.columns[kCurrency].name.empty() && m.currency.empty()) {
      mappingError(file, columns.Mark(),
                   "columns: no 'currency', and no fixed 'currency' key either: one is required");
    }
    if (!m.columns[kBookedAt].name.empty() && hasTime && m.zone.empty()) {
      mappingError(file, m.columns[kBookedAt].mark,
                   "columns.booked_at: booked_at_format has a time, so 'timezone' is required "
                   "(such as \"+08:00\")");
    }

    if (const YAML::Node kinds = root["kinds"]) {
      if (!kinds.IsMap()) mappingError(file, kinds.Mark(), "kinds: expected a mapping");
      for (const auto& entry : kinds) {
        const std::string category = entry.first.as<std::string>();
        KindSpec spec;
        YAML::Node kindNode;
        if (entry.second.IsMap()) {
          for (const auto& k : entry.second) {
            const std::string key = k.first.as<std::string>();
            if (key != "kind" && key != "columns") {
              mappingError(
                  file, k.first.Mark(),
                  "kinds." + category + ": unknown key '" + key + "' (known: kind, columns)");
            }
          }
          kindNode = entry.second["kind"];
          if (const YAML::Node c = entry.second["columns"]) {
            spec.columns = readColumns(file, c, "kinds." + category + ".columns");
          }
        } else {
          kindNode = entry.second;
        }
        if (kindNode && !kindNode.IsNull()) {
          const std::string kind = scalar(file, kindNode, "kinds." + category);
          if (std::find(kKinds.begin(), kKinds.end(), kind) == kKinds.end()) {
            mappingError(file, kindNode.Mark(),
                         "kinds." + category + ": unknown kind '" + kind +
                             "' (known: " + joined(kKinds) + ")");
          }
          spec.kind = kind;
        }
        m.kinds.emplace(category, std::move(spec));
      }
    }
  } catch (const YAML::Exception& e) {
    mappingError(file, e.mark, e.msg);
  }
  return m;
}

// Each mapped column's place in the header; a name the header lacks is the mapping's error.
void resolve(const Mapping& m, Columns& columns, const CsvHeader& header,
             const std::string& statementFile, std::string_view where) {
  for (std::size_t r = 0; r < kRoleCount; ++r) {
    ColumnSpec& spec = columns[r];
    if (spec.name.empty()) continue;
    spec.index = header.find(spec.name);
    if (!spec.index) {
      mappingError(m.file, spec.mark,
                   std::string(where) + "." + std::string(kRoleNames[r]) + ": column '" +
                       spec.name + "' is not in " + statementFile + "'s header (line " +
                       std::to_string(header.line()) + ")");
    }
  }
}

}  // namespace

std::optional<StatementPeriod> readMappedCsv(const std::string& path,
                                             const StatementOptions& options,
                                             const LineSink& onLine) {
  if (options.mappingFile.empty()) {
    throw StatementError(path, 0, 0, "the csv format needs a mapping file");
  }
  Mapping m = loadMapping(options.mappingFile);
  CsvReader reader(path, m.dialect);
  for (std::size_t i = 0; i < m.skipLines; ++i) {
    if (!reader.skipLine()) break;
  }
  if (!reader.next()) throw StatementError(path, 0, 0, "the file is empty: no header row");
  const CsvHeader header(reader);
  resolve(m, m.columns, header, path, "columns");
  for (auto& [category, spec] : m.kinds) {
    resolve(m, spec.columns, header, path, "kinds." + category + ".columns");
  }

  while (reader.next()) {
    if (!m.stopAt.empty() && reader[0].starts_with(m.stopAt)) break;
    header.checkWidth(reader);
    StatementLine line;
    line.sourceLine = reader.line();
    line.category = reader[*m.columns[kCategory].index];
    const auto kind = m.kinds.find(line.category);
    const KindSpec* spec = kind == m.kinds.end() ? nullptr : &kind->second;
    if (spec != nullptr) line.flowKind = spec->kind;
    // The column of a role for this line: the category's override, else the mapping's.
    const auto column = [&](Role role) -> std::optional<std::size_t> {
      if (spec != nullptr && spec->columns[role].index) return spec->columns[role].index;
      return m.columns[role].index;
    };
    const auto value = [&](Role role) -> std::string {
      const std::optional<std::size_t> i = column(role);
      return i ? std::string(reader[*i]) : std::string();
    };

    const std::size_t lineId = *column(kLineId);
    line.lineId = reader[lineId];
    if (line.lineId.empty())
      reader.fail(lineId, header.name(lineId) + ": empty, a line id is needed");
    if (const std::optional<std::size_t> c = column(kCurrency)) {
      line.currency = currencyAt(reader, *c, header.name(*c));
    } else {
      line.currency = m.currency;
    }
    const std::size_t amount = *column(kAmount);
    if (reader[amount].empty())
      reader.fail(amount, header.name(amount) + ": empty, an amount is needed");
    line.amountMinor = std::llabs(minorUnitsAt(reader, amount, header.name(amount), line.currency));
    if (const std::optional<std::size_t> c = column(kFee); c && !reader[*c].empty()) {
      line.feeMinor = std::llabs(minorUnitsAt(reader, *c, header.name(*c), line.currency));
    }
    if (const std::optional<std::size_t> c = column(kBookedAt); c && !reader[*c].empty()) {
      const std::optional<CivilTime> t = parseCivilTime(reader[*c], m.bookedAtFormat);
      if (!t) {
        reader.fail(*c, header.name(*c) + ": '" + std::string(reader[*c]) + "' does not match " +
                            m.bookedAtFormat);
      }
      line.bookedAt = t->hasTime ? formatDateTime(*t, m.zone) : formatDate(*t);
    }
    if (const std::optional<std::size_t> c = column(kValueDate); c && !reader[*c].empty()) {
      const std::optional<CivilTime> t = parseCivilTime(reader[*c], m.valueDateFormat);
      if (!t) {
        reader.fail(*c, header.name(*c) + ": '" + std::string(reader[*c]) + "' does not match " +
                            m.valueDateFormat);
      }
      line.valueDate = formatDate(*t);
    }
    line.gatewayRef = value(kGatewayRef);
    line.idempotencyKey = value(kIdempotencyKey);
    line.bizId = value(kBizId);
    line.fields.reserve(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) {
      line.fields.emplace_back(header.name(i), reader[i]);
    }
    onLine(std::move(line));
  }
  return std::nullopt;
}

}  // namespace idem::statements

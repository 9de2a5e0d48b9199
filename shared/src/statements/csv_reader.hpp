// The CSV reader every CSV statement format shares: RFC 4180 quoting (delimiters, doubled quotes
// and line breaks inside quotes), LF or CRLF, a UTF-8 byte order mark skipped, fully empty lines
// skipped. It reads a bounded buffer at a time: memory stays the same whatever the file's size.
// Text is UTF-8 (validated) or, for the mapped CSV, an encoding iconv converts; fields are split
// on the file's own bytes, so that lines and columns are the file's as it is on disk.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::statements {

// iconv_open's failure value, (iconv_t)-1, compared without casting an integer to a pointer.
inline bool iconvFailed(const void* descriptor) noexcept {
  return reinterpret_cast<std::intptr_t>(descriptor) == -1;
}

struct CsvDialect {
  char delimiter = ',';
  // Empty or UTF-8: the text is validated. Anything else is converted to UTF-8 with iconv.
  std::string encoding{};
  // Lines that begin with it are skipped (empty: none). In the file's encoding's terms: compared
  // with the line's first bytes after conversion of the prefix.
  std::string commentPrefix{};
  // Removed once from the start of every field (WeChat Pay's backtick).
  std::string stripPrefix{};
  // The exporter ends every line with a line break (Stripe's, Adyen's reports): a last line
  // without one is a file cut short (still being written, a failed copy), whose last field may
  // be cut inside a key or an amount. Refused rather than read as if whole.
  bool lastLineEnds = false;
};

class CsvReader {
 public:
  CsvReader(std::string path, CsvDialect dialect);
  ~CsvReader();
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;
  CsvReader(CsvReader&&) = delete;
  CsvReader& operator=(CsvReader&&) = delete;

  // The next record, false at the end of the file. Fully empty lines, lines whose every field is
  // empty (",,,") and comment lines are passed over.
  bool next();
  // Passes over one line as it is, whatever it holds; false at the end of the file.
  bool skipLine();

  std::size_t size() const noexcept { return fields_.size(); }
  std::string_view operator[](std::size_t i) const noexcept {
    return {record_.data() + fields_[i].begin, fields_[i].end - fields_[i].begin};
  }
  std::uint64_t line() const noexcept { return recordLine_; }  // where the record starts
  std::uint64_t fieldLine(std::size_t i) const noexcept { return fields_[i].line; }
  std::uint64_t fieldColumn(std::size_t i) const noexcept { return fields_[i].column; }
  // The column just past the record's last byte, on its last line.
  std::uint64_t endLine() const noexcept { return endLine_; }
  std::uint64_t endColumn() const noexcept { return endColumn_; }
  const std::string& path() const noexcept { return path_; }

  [[noreturn]] void fail(std::size_t field, const std::string& problem) const;
  [[noreturn]] void failAt(std::uint64_t line, std::uint64_t column,
                           const std::string& problem) const;

 private:
  struct Field {
    std::size_t begin;
    std::size_t end;
    std::uint64_t line;
    std::uint64_t column;
  };

  bool readLine();  // into line_, false at the end of the file
  void refill();
  void validateUtf8(std::string_view text, std::uint64_t column) const;
  void finishField(std::size_t begin, std::uint64_t line, std::uint64_t column);

  std::string path_;
  CsvDialect dialect_;
  std::FILE* file_ = nullptr;
  void* iconv_ = nullptr;  // iconv_t when the encoding is not UTF-8
  std::string rawCommentPrefix_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool eof_ = false;
  bool unterminated_ = false;  // the file's last line has no line break
  std::string_view line_;
  std::uint64_t lineNumber_ = 0;
  std::string record_;
  std::string scratch_;
  std::vector<Field> fields_;
  std::uint64_t recordLine_ = 0;
  std::uint64_t endLine_ = 0;
  std::uint64_t endColumn_ = 0;
};

// The header row: column names and where each is.
class CsvHeader {
 public:
  explicit CsvHeader(const CsvReader& reader);
  std::size_t size() const noexcept { return names_.size(); }
  const std::string& name(std::size_t i) const noexcept { return names_[i]; }
  const std::vector<std::string>& names() const noexcept { return names_; }
  std::optional<std::size_t> find(std::string_view name) const;
  // The column's index, or a StatementError at the header's line naming the missing column.
  std::size_t require(const CsvReader& reader, std::string_view name) const;
  std::uint64_t line() const noexcept { return line_; }
  // A StatementError unless the current record has as many fields as the header.
  void checkWidth(const CsvReader& reader) const;

 private:
  std::vector<std::string> names_;
  std::uint64_t line_;
};

// The helpers the CSV formats share, each failing at the field with the column's name.
// An upper-cased ISO 4217 code.
std::string currencyAt(const CsvReader& reader, std::size_t field, std::string_view column);
// Major units as the currency's minor units, through idem::parseMinorUnits.
std::int64_t minorUnitsAt(const CsvReader& reader, std::size_t field, std::string_view column,
                          std::string_view currency);

}  // namespace idem::statements

#include "csv_reader.hpp"

#include <iconv.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "idem/currencies.hpp"
#include "idem/statement_formats.hpp"

namespace idem::statements {
namespace {

constexpr std::size_t kInitialBuffer = std::size_t{256} * 1024;
// A line, or a record whose quoted field spans lines, beyond this is refused: memory stays
// bounded even when a quote never closes.
constexpr std::size_t kMaxRecord = std::size_t{64} * 1024 * 1024;

bool isUtf8Name(std::string_view name) {
  std::string lower;
  for (char ch : name) {
    if (ch != '-' && ch != '_')
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return lower.empty() || lower == "utf8";
}

std::string hexByte(unsigned char byte) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string text = "0x";
  text += kHex[byte >> 4];
  text += kHex[byte & 0xF];
  return text;
}

// The length of the valid UTF-8 sequence at text[i], 0 when it is not one (overlong forms,
// surrogates and code points beyond U+10FFFF included).
std::size_t utf8Sequence(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = at(i);
  const auto cont = [&](std::size_t k) { return k < text.size() && (at(k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    const unsigned char c1 = at(i + 1);
    if (c == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const unsigned char c1 = at(i + 1);
    if (c == 0xF0 && c1 < 0x90) return 0;   // overlong
    if (c == 0xF4 && c1 >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

CsvReader::CsvReader(std::string path, CsvDialect dialect)
    : path_(std::move(path)), dialect_(std::move(dialect)) {
  if (!isUtf8Name(dialect_.encoding)) {
    iconv_t cd = iconv_open("UTF-8", dialect_.encoding.c_str());
    if (iconvFailed(cd)) {
      throw StatementError(path_, 0, 0, "unknown encoding '" + dialect_.encoding + "'");
    }
    iconv_ = cd;
    // The comment prefix in the file's own bytes, so that lines are compared before conversion.
    if (!dialect_.commentPrefix.empty()) {
      iconv_t back = iconv_open(dialect_.encoding.c_str(), "UTF-8");
      if (!iconvFailed(back)) {
        std::string in = dialect_.commentPrefix;
        std::string out(in.size() * 4 + 8, '\0');
        char* inPtr = in.data();
        std::size_t inLeft = in.size();
        char* outPtr = out.data();
        std::size_t outLeft = out.size();
        if (iconv(back, &inPtr, &inLeft, &outPtr, &outLeft) != static_cast<std::size_t>(-1)) {
          out.resize(out.size() - outLeft);
          rawCommentPrefix_ = out;
        }
        iconv_close(back);
      }
    }
  } else {
    rawCommentPrefix_ = dialect_.commentPrefix;
  }
  file_ = std::fopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    const int error = errno;
    if (iconv_ != nullptr) iconv_close(static_cast<iconv_t>(iconv_));
    throw StatementError(path_, 0, 0, std::string("cannot open: ") + std::strerror(error));
  }
  buffer_.resize(kInitialBuffer);
}

CsvReader::~CsvReader() {
  if (file_ != nullptr) std::fclose(file_);
  if (iconv_ != nullptr) iconv_close(static_cast<iconv_t>(iconv_));
}

void CsvReader::failAt(std::uint64_t line, std::uint64_t column, const std::string& problem) const {
  throw StatementError(path_, line, column, problem);
}

void CsvReader::fail(std::size_t field, const std::string& problem) const {
  failAt(fields_[field].line, fields_[field].column, problem);
}

void CsvReader::refill() {
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) {
    if (buffer_.size() >= kMaxRecord) {
      failAt(lineNumber_ + 1, 1, "a line longer than " + std::to_string(kMaxRecord) + " bytes");
    }
    buffer_.resize(buffer_.size() * 2);
  }
  const std::size_t n = std::fread(buffer_.data() + end_, 1, buffer_.size() - end_, file_);
  end_ += n;
  if (n == 0) {
    if (std::ferror(file_) != 0) failAt(lineNumber_ + 1, 1, "the file cannot be read");
    eof_ = true;
  }
}

bool CsvReader::readLine() {
  for (;;) {
    const char* base = buffer_.data();
    const void* newline = std::memchr(base + begin_, '\n', end_ - begin_);
    if (newline != nullptr) {
      const auto stop = static_cast<std::size_t>(static_cast<const char*>(newline) - base);
      line_ = std::string_view(base + begin_, stop - begin_);
      begin_ = stop + 1;
      break;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      line_ = std::string_view(base + begin_, end_ - begin_);
      begin_ = end_;
      unterminated_ = true;
      break;
    }
    refill();
  }
  ++lineNumber_;
  if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
  if (iconv_ == nullptr) {
    if (lineNumber_ == 1 && line_.starts_with("\xEF\xBB\xBF")) line_.remove_prefix(3);
    validateUtf8(line_, 1);
  }
  return true;
}

void CsvReader::validateUtf8(std::string_view text, std::uint64_t column) const {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    // Eight ASCII bytes at a time: the common case.
    if (i + 8 <= n) {
      std::uint64_t word = 0;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const std::size_t length = utf8Sequence(text, i);
    if (length == 0) {
      failAt(lineNumber_, column + i,
             "invalid UTF-8 byte " + hexByte(static_cast<unsigned char>(text[i])) +
                 " (is the file in another encoding?)");
    }
    i += length;
  }
}

void CsvReader::finishField(std::size_t begin, std::uint64_t line, std::uint64_t column) {
  if (iconv_ != nullptr && begin < record_.size()) {
    const std::size_t inSize = record_.size() - begin;
    scratch_.resize(inSize * 2 + 16);
    char* in = record_.data() + begin;
    std::size_t inLeft = inSize;
    char* out = scratch_.data();
    std::size_t outLeft = scratch_.size();
    auto* cd = static_cast<iconv_t>(iconv_);
    iconv(cd, nullptr, nullptr, nullptr, nullptr);
    if (iconv(cd, &in, &inLeft, &out, &outLeft) == static_cast<std::size_t>(-1) ||
        iconv(cd, nullptr, nullptr, &out, &outLeft) == static_cast<std::size_t>(-1)) {
      const auto offset = static_cast<std::size_t>(in - (record_.data() + begin));
      const auto byte = offset < inSize ? static_cast<unsigned char>(in[0]) : 0;
      failAt(line, column + offset,
             "invalid " + dialect_.encoding + " byte " + hexByte(byte) +
                 " (is the file in the encoding the mapping names?)");
    }
    record_.resize(begin);
    record_.append(scratch_.data(), scratch_.size() - outLeft);
  }
  const std::string& prefix = dialect_.stripPrefix;
  if (!prefix.empty() && record_.size() - begin >= prefix.size() &&
      record_.compare(begin, prefix.size(), prefix) == 0) {
    record_.erase(begin, prefix.size());
  }
  fields_.push_back(Field{begin, record_.size(), line, column});
}

bool CsvReader::skipLine() {
  return readLine();
}

bool CsvReader::next() {
  const char delimiter = dialect_.delimiter;
  for (;;) {
    if (!readLine()) return false;
    if (line_.empty()) continue;
    if (!rawCommentPrefix_.empty() && line_.starts_with(rawCommentPrefix_)) continue;
    record_.clear();
    fields_.clear();
    recordLine_ = lineNumber_;
    std::size_t pos = 0;
    for (;;) {
      const std::uint64_t fieldLine = lineNumber_;
      const std::uint64_t fieldColumn = pos + 1;
      const std::size_t begin = record_.size();
      if (pos < line_.size() && line_[pos] == '"') {
        ++pos;
        for (;;) {
          const std::size_t quote = line_.find('"', pos);
          if (quote == std::string_view::npos) {
            record_.append(line_.substr(pos));
            record_ += '\n';
            if (record_.size() > kMaxRecord) {
              failAt(fieldLine, fieldColumn,
                     "the quoted field that opens here runs beyond " + std::to_string(kMaxRecord) +
                         " bytes (a quote never closed?)");
            }
            if (!readLine()) {
              failAt(fieldLine, fieldColumn,
                     "the quoted field that opens here never closes: the file ends inside it "
                     "(truncated?)");
            }
            pos = 0;
            continue;
          }
          record_.append(line_.substr(pos, quote - pos));
          if (quote + 1 < line_.size() && line_[quote + 1] == '"') {
            record_ += '"';
            pos = quote + 2;
            continue;
          }
          pos = quote + 1;
          break;
        }
        if (pos < line_.size() && line_[pos] != delimiter) {
          failAt(lineNumber_, pos + 1,
                 "text after a quoted field's closing quote: expected the delimiter or the line's "
                 "end");
        }
      } else {
        std::size_t stop = line_.find(delimiter, pos);
        if (stop == std::string_view::npos) stop = line_.size();
        record_.append(line_.substr(pos, stop - pos));
        pos = stop;
      }
      finishField(begin, fieldLine, fieldColumn);
      if (pos >= line_.size()) break;
      ++pos;  // the delimiter
    }
    endLine_ = lineNumber_;
    endColumn_ = line_.size() + 1;
    const bool blank = std::all_of(fields_.begin(), fields_.end(),
                                   [](const Field& f) { return f.begin == f.end; });
    if (!blank && unterminated_ && dialect_.lastLineEnds) {
      failAt(endLine_, endColumn_,
             "the file ends inside this line, without its line break: it was cut short (still "
             "being written, or copied in part?)");
    }
    if (!blank) return true;
  }
}

CsvHeader::CsvHeader(const CsvReader& reader) : line_(reader.line()) {
  names_.reserve(reader.size());
  for (std::size_t i = 0; i < reader.size(); ++i) names_.emplace_back(reader[i]);
}

std::optional<std::size_t> CsvHeader::find(std::string_view name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) return std::nullopt;
  return static_cast<std::size_t>(it - names_.begin());
}

std::size_t CsvHeader::require(const CsvReader& reader, std::string_view name) const {
  const std::optional<std::size_t> index = find(name);
  if (!index) reader.failAt(line_, 1, "the header has no column '" + std::string(name) + "'");
  return *index;
}

void CsvHeader::checkWidth(const CsvReader& reader) const {
  if (reader.size() == names_.size()) return;
  const std::string problem = "expected " + std::to_string(names_.size()) +
                              " fields as the header has, found " + std::to_string(reader.size());
  if (reader.size() > names_.size()) reader.fail(names_.size(), problem);
  reader.failAt(reader.endLine(), reader.endColumn(), problem);
}

std::string currencyAt(const CsvReader& reader, std::size_t field, std::string_view column) {
  std::string code(reader[field]);
  for (char& ch : code) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (code.empty()) reader.fail(field, std::string(column) + ": empty, a currency code is needed");
  if (!isIso4217(code)) {
    reader.fail(field, std::string(column) + ": '" + std::string(reader[field]) +
                           "' is not an ISO 4217 currency code");
  }
  return code;
}

std::int64_t minorUnitsAt(const CsvReader& reader, std::size_t field, std::string_view column,
                          std::string_view currency) {
  try {
    const std::int64_t value = parseMinorUnits(reader[field], currency);
    // Amounts are kept as magnitudes: the smallest value has none.
    if (value == std::numeric_limits<std::int64_t>::min()) {
      throw std::invalid_argument("amount '" + std::string(reader[field]) +
                                  "': outside the ledger's 64-bit range");
    }
    return value;
  } catch (const std::invalid_argument& e) {
    reader.fail(field, std::string(column) + ": " + e.what());
  }
}

}  // namespace idem::statements

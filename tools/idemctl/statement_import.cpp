#include "statement_import.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/hex.hpp"

namespace idem::ctl {
namespace {

constexpr const char* kOpen =
    "SELECT statement_id, already_imported FROM idem.open_statement($1, $2, $3, $4)";
constexpr const char* kAdd = "SELECT idem.add_statement_lines($1, $2::jsonb)";
constexpr const char* kClose =
    "SELECT new_lines, matched, mismatched, unmatched, duplicate, not_a_flow, pending, "
    "resolved_success, resolved_failed "
    "FROM idem.close_statement($1, $2, $3::timestamptz, $4::timestamptz, $5)";
constexpr const char* kNeedsPerson =
    "SELECT line_id, source_line, result, detail FROM idem.statement_lines "
    "WHERE statement_id = $1 AND result IN ('mismatched', 'unmatched', 'duplicate') "
    "ORDER BY source_line LIMIT $2";
constexpr int kNeedsPersonShown = 20;

// Whether TEXT is well-formed UTF-8 (what a JSON string must be).
bool validUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return false;
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// TEXT as a JSON string, appended to OUT: what nlohmann::json's dump() writes, without building
// a document first (the importer's own cost was mostly that). Not UTF-8: nlohmann says why.
void appendJsonString(std::string& out, std::string_view text) {
  if (!validUtf8(text)) {
    out += nlohmann::json(std::string(text)).dump();  // throws type_error 316, as before
    return;
  }
  out += '"';
  for (const char ch : text) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          std::array<char, 8> escaped{};
          std::snprintf(escaped.data(), escaped.size(), "\\u%04x", static_cast<unsigned>(ch));
          out += escaped.data();
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// One line as the JSON object idem.add_statement_lines reads, appended to OUT.
void appendJson(std::string& out, const StatementLine& line) {
  const auto key = [&](const char* name) {
    out += '"';
    out += name;
    out += "\":";
  };
  out += '{';
  key("line_id");
  appendJsonString(out, line.lineId);
  out += ',';
  key("source_line");
  out += std::to_string(line.sourceLine);
  out += ',';
  key("category");
  appendJsonString(out, line.category);
  out += ',';
  key("amount_minor");
  out += std::to_string(line.amountMinor);
  out += ',';
  key("currency");
  appendJsonString(out, line.currency);
  out += ',';
  key("booked");
  out += line.booked ? "true" : "false";
  if (line.flowKind) {
    out += ',';
    key("flow_kind");
    appendJsonString(out, *line.flowKind);
  }
  if (line.feeMinor) {
    out += ',';
    key("fee_minor");
    out += std::to_string(*line.feeMinor);
  }
  const auto optional = [&](const char* name, const std::string& value) {
    if (value.empty()) return;
    out += ',';
    key(name);
    appendJsonString(out, value);
  };
  optional("booked_at", line.bookedAt);
  optional("value_date", line.valueDate);
  optional("gateway_ref", line.gatewayRef);
  optional("idempotency_key", line.idempotencyKey);
  optional("biz_id", line.bizId);
  out += ',';
  key("fields");
  out += '{';
  bool first = true;
  for (const auto& [name, value] : line.fields) {
    if (!first) out += ',';
    first = false;
    appendJsonString(out, name);
    out += ':';
    appendJsonString(out, value);
  }
  out += "}}";
}

// "line 7: ..." from add_statement_lines becomes "FILE:7: ...", the way a parser's error reads.
DatabaseError withFile(const pqxx::sql_error& e, const std::string& path) {
  static const std::regex linePrefix(R"(^line ([0-9]+): )");
  const std::string message = primaryMessage(e.what());
  std::smatch m;
  if (!std::regex_search(message, m, linePrefix))
    return DatabaseError(e.sqlstate(), "import-statement: " + message);
  return DatabaseError(e.sqlstate(), path + ":" + m[1].str() + ": " + m.suffix().str() +
                                         "; nothing of the file was imported");
}

}  // namespace

std::string fileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StatementError(path, 0, 0, "cannot be read");
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                    &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::array<char, 1 << 16> buffer{};
  while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0) {
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
    if (in.eof()) break;
  }
  if (in.bad()) throw StatementError(path, 0, 0, "could not be read to the end");
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest.data(), &size);
  return hexEncode(digest.data(), size);
}

namespace {
StatementImportReport importOnce(pqxx::connection& connection,
                                 const StatementImportRequest& request) {
  StatementImportReport report;
  report.sha256 = fileSha256(request.path);
  return translatingErrors("import-statement", [&] {
    Work tx(connection);
    // Dates without a time are the gateway's days in UTC, as every format here books them.
    tx.exec("SET LOCAL TimeZone = 'UTC'");
    const std::string name = request.path.substr(request.path.find_last_of('/') + 1);
    const pqxx::row opened =
        tx.exec_params1(kOpen, request.gateway, std::string(statementFormatName(request.format)),
                        name, report.sha256);
    report.statementId = opened[0].as<std::int64_t>();
    report.alreadyImported = opened[1].as<bool>();
    if (report.alreadyImported) return report;

    // Batches go to the database on a second thread while this one reads and writes the next:
    // reading the file and matching its lines overlap, one batch in flight at a time (the
    // transaction is only ever used by one thread at once).
    std::string batch = "[";
    std::size_t inBatch = 0;
    std::future<void> inFlight;
    const auto send = [&](const std::string& text) {
      try {
        tx.exec_params(kAdd, report.statementId, text);
      } catch (const pqxx::sql_error& e) {
        throw withFile(e, request.path);
      }
    };
    const auto flush = [&] {
      if (inBatch == 0) return;
      batch += ']';
      if (inFlight.valid()) inFlight.get();  // the previous batch's error, first
      inFlight = std::async(std::launch::async, send, std::move(batch));
      batch = "[";
      inBatch = 0;
    };
    std::optional<StatementPeriod> filePeriod;
    try {
      filePeriod =
          readStatement(request.path, request.format, request.options, [&](StatementLine&& line) {
            ++report.lines;
            if (inBatch > 0) batch += ',';
            appendJson(batch, line);
            if (++inBatch >= request.batchSize) flush();
          });
      flush();
    } catch (...) {
      // An earlier line's error, from the batch in flight, is the one the file meets first.
      if (inFlight.valid()) inFlight.get();
      throw;
    }
    if (inFlight.valid()) inFlight.get();
    std::optional<std::string> from = request.periodFrom, to = request.periodTo;
    if (!from && filePeriod) {
      from = filePeriod->from;
      to = filePeriod->to;
    }
    const pqxx::row c =
        tx.exec_params1(kClose, report.statementId, static_cast<std::int64_t>(report.lines), from,
                        to, request.final);
    report.newLines = c[0].as<std::int64_t>();
    report.matched = c[1].as<std::int64_t>();
    report.mismatched = c[2].as<std::int64_t>();
    report.unmatched = c[3].as<std::int64_t>();
    report.duplicate = c[4].as<std::int64_t>();
    report.notAFlow = c[5].as<std::int64_t>();
    report.pending = c[6].as<std::int64_t>();
    report.resolvedSuccess = c[7].as<std::int64_t>();
    report.resolvedFailed = c[8].as<std::int64_t>();
    for (const pqxx::row& r : tx.exec_params(kNeedsPerson, report.statementId, kNeedsPersonShown)) {
      report.needsPerson.push_back(
          {r[0].c_str(), r[1].as<std::uint64_t>(), r[2].c_str(), r[3].c_str()});
    }
    tx.commit();
    return report;
  });
}

}  // namespace

// Two imports of overlapping files may meet on a line both read as new: one of them rolls back
// whole (a serialization failure or a deadlock, nothing of it written) and is simply run again.
StatementImportReport importStatement(pqxx::connection& connection,
                                      const StatementImportRequest& request) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    try {
      return importOnce(connection, request);
    } catch (const DatabaseError& e) {
      if (e.kind() != DatabaseErrorKind::Serialization || attempt == kAttempts) throw;
    }
  }
}

}  // namespace idem::ctl

#include "statement_import.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"

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

nlohmann::json toJson(const StatementLine& line) {
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& [name, value] : line.fields) fields[name] = value;
  nlohmann::json j{{"line_id", line.lineId},     {"source_line", line.sourceLine},
                   {"category", line.category},  {"amount_minor", line.amountMinor},
                   {"currency", line.currency},  {"booked", line.booked},
                   {"fields", std::move(fields)}};
  if (line.flowKind) j["flow_kind"] = *line.flowKind;
  if (line.feeMinor) j["fee_minor"] = *line.feeMinor;
  if (!line.bookedAt.empty()) j["booked_at"] = line.bookedAt;
  if (!line.valueDate.empty()) j["value_date"] = line.valueDate;
  if (!line.gatewayRef.empty()) j["gateway_ref"] = line.gatewayRef;
  if (!line.idempotencyKey.empty()) j["idempotency_key"] = line.idempotencyKey;
  if (!line.bizId.empty()) j["biz_id"] = line.bizId;
  return j;
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
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

StatementImportReport importStatement(pqxx::connection& connection,
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

    nlohmann::json batch = nlohmann::json::array();
    const auto flush = [&] {
      if (batch.empty()) return;
      try {
        tx.exec_params(kAdd, report.statementId, batch.dump());
      } catch (const pqxx::sql_error& e) {
        throw withFile(e, request.path);
      }
      batch = nlohmann::json::array();
    };
    const std::optional<StatementPeriod> filePeriod =
        readStatement(request.path, request.format, request.options, [&](StatementLine&& line) {
          ++report.lines;
          batch.push_back(toJson(line));
          if (batch.size() >= request.batchSize) flush();
        });
    flush();
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

}  // namespace idem::ctl

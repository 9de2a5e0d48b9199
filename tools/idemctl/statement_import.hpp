// Importing a gateway's statement file into idem.statements and idem.statement_lines: once per
// file (its SHA-256), in one transaction, streamed in batches so that memory stays bounded however
// long the file. Each new charge or refund line is matched against the records by the database
// (idem.add_statement_lines), so the importer only reads, ships and reports.
#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/statement_formats.hpp"

namespace idem::ctl {

struct StatementImportRequest {
  std::string path;
  StatementFormat format = StatementFormat::StripeItemized;
  std::string gateway;
  StatementOptions options;
  // The period the statement covers, [from, to) as ISO 8601; the file's own (camt FrToDt) when
  // not given, else the span of its lines.
  std::optional<std::string> periodFrom;
  std::optional<std::string> periodTo;
  bool final = false;
  std::size_t batchSize = 2000;
};

struct NeedsPerson {
  std::string lineId;
  std::uint64_t sourceLine = 0;
  std::string result;
  std::string detail;
};

struct StatementImportReport {
  std::int64_t statementId = 0;
  bool alreadyImported = false;
  std::string sha256;
  std::uint64_t lines = 0;  // lines in the file
  std::int64_t newLines = 0, matched = 0, mismatched = 0, unmatched = 0, duplicate = 0,
               notAFlow = 0, pending = 0, resolvedSuccess = 0, resolvedFailed = 0;
  std::vector<NeedsPerson> needsPerson;  // the first few mismatched, unmatched, duplicate lines
};

// The file's SHA-256 in lower-case hex. Throws StatementError when it cannot be read.
std::string fileSha256(const std::string& path);

// Imports the file, or finds it imported already. Throws StatementError for a malformed file and
// DatabaseError for what the database refused (a line repeated, a line that changed since an
// earlier file: named by its line); either way nothing of the file is imported.
StatementImportReport importStatement(pqxx::connection& connection,
                                      const StatementImportRequest& request);

}  // namespace idem::ctl

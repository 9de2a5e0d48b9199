// A gateway's statement read as the ledger reads it: Stripe's itemized balance report, ISO 20022
// camt.053 and camt.054, Adyen's settlement details report, and any other CSV through a small YAML
// mapping (the Chinese wallets' daily bills among them). Each format yields the same line: the
// gateway's id of the line, the side effect it is (a fund flow kind, or none for fees and payouts),
// its gross amount in the currency's minor units, and the references a line is matched by. Files
// are read as a stream, one line at a time; the first malformed thing stops the read with its line
// and column, so that the importer can refuse the whole file and import nothing of it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem {

enum class StatementFormat { StripeItemized, Camt053, Camt054, AdyenSettlement, MappedCsv };

// The names `idemctl import-statement --format` takes: stripe, camt.053, camt.054, adyen, csv.
std::optional<StatementFormat> statementFormatFromName(std::string_view name);
std::string_view statementFormatName(StatementFormat format);
// "stripe, camt.053, camt.054, adyen, csv", for help texts and errors.
std::string statementFormatNames();

// A malformed file, and where: 1-based line and column of the file as it is on disk (a GBK bill's
// line numbers are its own). what() is "FILE:LINE:COLUMN: PROBLEM"; line 0 means the file as a
// whole (it cannot be opened, it is empty).
class StatementError : public std::runtime_error {
 public:
  StatementError(const std::string& file, std::uint64_t line, std::uint64_t column,
                 const std::string& problem);
  std::uint64_t line() const noexcept { return line_; }
  std::uint64_t column() const noexcept { return column_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::uint64_t line_;
  std::uint64_t column_;
  std::string problem_;
};

struct StatementLine {
  std::uint64_t sourceLine = 0;  // where the line starts in the file
  // The gateway's own id of this line, unique among the gateway's lines: the same line in two
  // files (a re-sent file, overlapping periods) is one line. Stripe: balance_transaction_id;
  // camt: the entry's AcctSvcrRef, else its NtryRef; Adyen: Psp Reference, Type and Modification
  // Reference joined with '/'; mapped CSV: the column the mapping names.
  std::string lineId;
  // The gateway's own word for the line: reporting_category, Type, the camt bank transaction
  // code's domain/family/sub-family or CRDT/DBIT, a mapped column.
  std::string category;
  // The fund flow the line is (DEBIT, CAPTURE, REFUND, CREDIT), none for a line that is not a
  // business object's side effect (a fee, a payout to the merchant, a transfer).
  std::optional<std::string> flowKind;
  std::int64_t amountMinor = 0;  // gross, never negative: the direction is the flow kind
  std::string currency;          // ISO 4217, upper case
  std::optional<std::int64_t> feeMinor;
  // When the gateway booked it: "YYYY-MM-DDTHH:MM:SSZ" (UTC) or "YYYY-MM-DDTHH:MM:SS+HH:MM" when
  // the file gives a time, "YYYY-MM-DD" when only a date.
  std::string bookedAt;
  std::string valueDate;  // "YYYY-MM-DD", empty when the format has none
  // The gateway's reference of the side effect itself (Stripe charge_id for a charge, source_id
  // for a refund; Adyen Psp Reference, or Modification Reference for a refund; camt TxDtls/Refs/
  // AcctSvcrRef, else the entry's): what the fund flow records as external_ref.
  std::string gatewayRef;
  // The idempotency key the client put where the gateway keeps it: Stripe
  // payment_metadata[idempotency_key], Adyen Merchant Reference, camt EndToEndId (NOTPROVIDED is
  // none), a mapped column. Empty when the line carries none.
  std::string idempotencyKey;
  // A business object id the line carries (Stripe payment_metadata[biz_id], a mapped column).
  std::string bizId;
  // camt Sts BOOK; PDNG and INFO entries are read but never decide anything.
  bool booked = true;
  // Every field of the line as the file gives it (name, value), kept as the evidence.
  std::vector<std::pair<std::string, std::string>> fields;
};

// The period a file declares it covers (camt Stmt/FrToDt, Ntfctn/FrToDt), as ISO 8601 text.
struct StatementPeriod {
  std::string from;
  std::string to;
};

struct StatementOptions {
  // MappedCsv: the YAML mapping file (docs/statements.md describes it). Required for csv.
  std::string mappingFile;
  // Stripe: the payment_metadata[...] key that holds the idempotency key, and the business object.
  std::string keyMetadata = "idempotency_key";
  std::string bizIdMetadata = "biz_id";
  // camt: the flow a credit (money in) and a debit (money out) of the account holder's account is.
  std::string camtCreditKind = "DEBIT";
  std::string camtDebitKind = "CREDIT";
};

// Reads `path` as `format`, calling onLine for each line in file order. Throws StatementError on
// the first malformed thing (nothing after it is read); an exception thrown by onLine passes
// through. Returns the period the file declares, if it declares one.
std::optional<StatementPeriod> readStatement(const std::string& path, StatementFormat format,
                                             const StatementOptions& options,
                                             const std::function<void(StatementLine&&)>& onLine);

}  // namespace idem

// Stripe's itemized balance change report (balance_change_from_activity.itemized.*): one row per
// balance transaction, columns named in a header row and in any order.
#include <cstdlib>

#include "csv_reader.hpp"
#include "statement_readers.hpp"

namespace idem::statements {
namespace {

std::string stripeDateTime(const CsvReader& reader, std::size_t field, std::string_view column) {
  const std::string_view text = reader[field];
  std::optional<CivilTime> t = parseCivilTime(text, "%Y-%m-%d %H:%M:%S");
  if (!t) t = parseCivilTime(text, "%Y-%m-%dT%H:%M:%SZ");
  if (!t) {
    reader.fail(field, std::string(column) + ": '" + std::string(text) +
                           "' is not a UTC date-time YYYY-MM-DD HH:MM:SS");
  }
  return formatDateTime(*t, "Z");
}

std::string stripeDate(const CsvReader& reader, std::size_t field, std::string_view column) {
  const std::string_view text = reader[field];
  std::optional<CivilTime> t = parseCivilTime(text, "%Y-%m-%d %H:%M:%S");
  if (!t) t = parseCivilTime(text, "%Y-%m-%d");
  if (!t) {
    reader.fail(field, std::string(column) + ": '" + std::string(text) +
                           "' is not a date YYYY-MM-DD or date-time YYYY-MM-DD HH:MM:SS");
  }
  return formatDate(*t);
}

}  // namespace

std::optional<StatementPeriod> readStripeItemized(const std::string& path,
                                                  const StatementOptions& options,
                                                  const LineSink& onLine) {
  CsvReader reader(path, CsvDialect{.lastLineEnds = true});
  if (!reader.next()) throw StatementError(path, 0, 0, "the file is empty: no header row");
  const CsvHeader header(reader);
  const std::size_t id = header.require(reader, "balance_transaction_id");
  const std::size_t created = header.require(reader, "created_utc");
  const std::size_t currency = header.require(reader, "currency");
  const std::size_t gross = header.require(reader, "gross");
  const std::size_t fee = header.require(reader, "fee");
  const std::size_t net = header.require(reader, "net");
  const std::size_t category = header.require(reader, "reporting_category");
  const std::size_t source = header.require(reader, "source_id");
  const std::optional<std::size_t> charge = header.find("charge_id");
  const std::optional<std::size_t> availableOn = header.find("available_on_utc");
  const std::optional<std::size_t> key =
      header.find("payment_metadata[" + options.keyMetadata + "]");
  const std::optional<std::size_t> bizId =
      header.find("payment_metadata[" + options.bizIdMetadata + "]");

  while (reader.next()) {
    header.checkWidth(reader);
    StatementLine line;
    line.sourceLine = reader.line();
    line.lineId = reader[id];
    if (line.lineId.empty()) reader.fail(id, "balance_transaction_id: empty");
    line.category = reader[category];
    line.currency = currencyAt(reader, currency, "currency");
    line.amountMinor = std::llabs(minorUnitsAt(reader, gross, "gross", line.currency));
    if (!reader[fee].empty()) {
      line.feeMinor = std::llabs(minorUnitsAt(reader, fee, "fee", line.currency));
    }
    // Not kept (gross and fee are), but a malformed net is a malformed file all the same.
    if (!reader[net].empty()) minorUnitsAt(reader, net, "net", line.currency);
    line.bookedAt = stripeDateTime(reader, created, "created_utc");
    if (availableOn && !reader[*availableOn].empty()) {
      line.valueDate = stripeDate(reader, *availableOn, "available_on_utc");
    }
    if (line.category == "charge") {
      line.flowKind = "DEBIT";
      line.gatewayRef = charge && !reader[*charge].empty() ? reader[*charge] : reader[source];
    } else if (line.category == "refund") {
      line.flowKind = "REFUND";
      line.gatewayRef = reader[source];
    } else {
      line.gatewayRef = reader[source];
    }
    if (key) line.idempotencyKey = reader[*key];
    if (bizId) line.bizId = reader[*bizId];
    line.fields.reserve(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) {
      line.fields.emplace_back(header.name(i), reader[i]);
    }
    onLine(std::move(line));
  }
  return std::nullopt;
}

}  // namespace idem::statements

// Adyen's Settlement details report: one row per booking of a settlement batch, the creation time
// in the zone the TimeZone column names, amounts in the gross (GC) and the net (NC) currency.
#include <array>
#include <cstdlib>
#include <limits>

#include "csv_reader.hpp"
#include "statement_readers.hpp"

namespace idem::statements {
namespace {

struct ZoneOffset {
  std::string_view name;
  std::string_view offset;
};

// The abbreviations Adyen's reports give; ambiguous ones (CST, IST) are not guessed.
constexpr std::array<ZoneOffset, 20> kZones{{
    {"UTC", "Z"},       {"GMT", "Z"},       {"WET", "Z"},       {"WEST", "+01:00"},
    {"BST", "+01:00"},  {"CET", "+01:00"},  {"CEST", "+02:00"}, {"EET", "+02:00"},
    {"EEST", "+03:00"}, {"MSK", "+03:00"},  {"SGT", "+08:00"},  {"HKT", "+08:00"},
    {"JST", "+09:00"},  {"AEST", "+10:00"}, {"AEDT", "+11:00"}, {"EST", "-05:00"},
    {"EDT", "-04:00"},  {"MST", "-07:00"},  {"PST", "-08:00"},  {"PDT", "-07:00"},
}};

std::optional<std::string> zoneOffset(std::string_view name) {
  for (const ZoneOffset& z : kZones) {
    if (z.name == name) return std::string(z.offset);
  }
  return normaliseZone(name);
}

std::string zoneNames() {
  std::string names;
  for (const ZoneOffset& z : kZones) {
    if (!names.empty()) names += ", ";
    names += z.name;
  }
  return names;
}

}  // namespace

std::optional<StatementPeriod> readAdyenSettlement(const std::string& path,
                                                   const StatementOptions& /*options*/,
                                                   const LineSink& onLine) {
  CsvReader reader(path, CsvDialect{.lastLineEnds = true});
  if (!reader.next()) throw StatementError(path, 0, 0, "the file is empty: no header row");
  const CsvHeader header(reader);
  const std::size_t psp = header.require(reader, "Psp Reference");
  const std::size_t merchantRef = header.require(reader, "Merchant Reference");
  const std::size_t created = header.require(reader, "Creation Date");
  const std::size_t timeZone = header.require(reader, "TimeZone");
  const std::size_t type = header.require(reader, "Type");
  const std::size_t modRef = header.require(reader, "Modification Reference");
  const std::size_t grossCurrency = header.require(reader, "Gross Currency");
  const std::size_t grossDebit = header.require(reader, "Gross Debit (GC)");
  const std::size_t grossCredit = header.require(reader, "Gross Credit (GC)");
  const std::optional<std::size_t> netCurrency = header.find("Net Currency");
  const std::optional<std::size_t> netDebit = header.find("Net Debit (NC)");
  const std::optional<std::size_t> netCredit = header.find("Net Credit (NC)");
  const std::optional<std::size_t> modMerchantRef = header.find("Modification Merchant Reference");
  const std::array<std::optional<std::size_t>, 4> feeColumns{
      header.find("Commission (NC)"), header.find("Markup (NC)"), header.find("Scheme Fees (NC)"),
      header.find("Interchange (NC)")};

  while (reader.next()) {
    header.checkWidth(reader);
    StatementLine line;
    line.sourceLine = reader.line();
    line.category = reader[type];
    const std::string_view kind = line.category;
    if (kind.empty()) reader.fail(type, "Type: empty");
    line.lineId =
        std::string(reader[psp]) + "/" + line.category + "/" + std::string(reader[modRef]);

    // Payouts and fees carry only net amounts: their gross columns are empty.
    const bool gross = !reader[grossCurrency].empty();
    std::size_t currencyField = grossCurrency;
    std::size_t debit = grossDebit;
    std::size_t credit = grossCredit;
    if (!gross) {
      if (!netCurrency || reader[*netCurrency].empty() || !netDebit || !netCredit) {
        reader.fail(grossCurrency, "Gross Currency: empty, and no net amount either");
      }
      currencyField = *netCurrency;
      debit = *netDebit;
      credit = *netCredit;
    }
    const std::string_view currencyColumn = gross ? "Gross Currency" : "Net Currency";
    line.currency = currencyAt(reader, currencyField, currencyColumn);
    // Settled is money in (credit), Refunded and Chargeback money out (debit); any other line
    // is read from whichever side it fills.
    const bool creditFirst =
        kind == "Settled" || (kind != "Refunded" && kind != "Chargeback" && reader[debit].empty());
    const std::size_t chosen = creditFirst ? (reader[credit].empty() ? debit : credit)
                                           : (reader[debit].empty() ? credit : debit);
    if (!reader[chosen].empty()) {
      line.amountMinor =
          std::llabs(minorUnitsAt(reader, chosen, header.name(chosen), line.currency));
    }

    if (gross && netCurrency && reader[*netCurrency] == reader[grossCurrency]) {
      std::int64_t fee = 0;
      bool any = false;
      for (const std::optional<std::size_t>& column : feeColumns) {
        if (!column || reader[*column].empty()) continue;
        const std::int64_t part =
            minorUnitsAt(reader, *column, header.name(*column), line.currency);
        if ((part > 0 && fee > std::numeric_limits<std::int64_t>::max() - part) ||
            (part < 0 && fee < std::numeric_limits<std::int64_t>::min() + 1 - part)) {
          reader.fail(*column, header.name(*column) + ": the fees' sum is outside 64 bits");
        }
        fee += part;
        any = true;
      }
      if (any) line.feeMinor = std::llabs(fee);
    }

    const std::string_view zoneName = reader[timeZone];
    const std::optional<std::string> zone = zoneOffset(zoneName);
    if (!zone) {
      reader.fail(timeZone, "TimeZone: unknown zone '" + std::string(zoneName) +
                                "' (known: " + zoneNames() + ", or an offset such as +01:00)");
    }
    const std::optional<CivilTime> t = parseCivilTime(reader[created], "%Y-%m-%d %H:%M:%S");
    if (!t) {
      reader.fail(created, "Creation Date: '" + std::string(reader[created]) +
                               "' is not a date-time YYYY-MM-DD HH:MM:SS");
    }
    line.bookedAt = formatDateTime(*t, *zone);

    line.idempotencyKey = reader[merchantRef];
    if (kind == "Settled") {
      line.flowKind = "DEBIT";
      line.gatewayRef = reader[psp];
    } else if (kind == "Refunded") {
      line.flowKind = "REFUND";
      line.gatewayRef = reader[modRef];
      if (modMerchantRef && !reader[*modMerchantRef].empty()) {
        line.idempotencyKey = reader[*modMerchantRef];
      }
    } else {
      line.gatewayRef = reader[psp].empty() ? reader[modRef] : reader[psp];
    }
    line.fields.reserve(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) {
      line.fields.emplace_back(header.name(i), reader[i]);
    }
    onLine(std::move(line));
  }
  return std::nullopt;
}

}  // namespace idem::statements

#include "statement_writer.hpp"

#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "downstream.hpp"
#include "idem/currencies.hpp"

namespace idem::sim {
namespace {

constexpr const char* kCurrency = "CNY";

// 2990 -> "29.90" in the currency's exponent, exactly (integer arithmetic only).
std::string major(std::int64_t minor) {
  const int exponent = minorUnitExponent(kCurrency).value_or(2);
  std::int64_t scale = 1;
  for (int i = 0; i < exponent; ++i) scale *= 10;
  const std::int64_t magnitude = minor < 0 ? -minor : minor;
  std::ostringstream out;
  if (minor < 0) out << '-';
  out << magnitude / scale;
  if (exponent > 0) out << '.' << std::setw(exponent) << std::setfill('0') << magnitude % scale;
  return out.str();
}

// "2026-12-01 10:15:42" (UTC) and its ISO 8601 forms.
std::string utc(std::int64_t unixMs, const char* pattern) {
  const std::time_t t = static_cast<std::time_t>(unixMs / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[40];
  std::strftime(text, sizeof text, pattern, &tm);
  return text;
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (const char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string xml(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A movement with no ledger line (a coupon) is no line of any statement.
bool moves(const SideEffect& e) {
  return e.kind.has_value();
}

void writeStripe(std::ostream& out, const std::vector<SideEffect>& movements) {
  out << "balance_transaction_id,created_utc,available_on_utc,currency,gross,fee,net,"
         "reporting_category,source_id,description,charge_id,payment_intent_id,"
         "payment_metadata[idempotency_key],payment_metadata[biz_id]\n";
  for (const SideEffect& e : movements) {
    if (!moves(e)) continue;
    const bool charge = *e.kind == FundFlowKind::Debit || *e.kind == FundFlowKind::Capture;
    if (!charge && *e.kind != FundFlowKind::Refund) continue;
    const std::int64_t gross = charge ? e.amountMinor : -e.amountMinor;
    const std::string at = utc(e.atUnixMs, "%Y-%m-%d %H:%M:%S");
    out << "txn_" << csv(e.ref) << ',' << at << ',' << at << ",cny," << major(gross) << ",0.00,"
        << major(gross) << ',' << (charge ? "charge" : "refund") << ',' << csv(e.ref) << ','
        << csv(e.bizType + " " + e.bizId) << ',' << (charge ? csv(e.ref) : std::string()) << ",,"
        << csv(e.key) << ',' << csv(e.bizId) << '\n';
  }
}

void writeAdyen(std::ostream& out, const std::vector<SideEffect>& movements) {
  out << "Company Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,"
         "Creation Date,TimeZone,Type,Modification Reference,Gross Currency,Gross Debit (GC),"
         "Gross Credit (GC),Exchange Rate,Net Currency,Net Debit (NC),Net Credit (NC),"
         "Commission (NC),Markup (NC),Scheme Fees (NC),Interchange (NC),Payment Method Variant,"
         "Modification Merchant Reference,Batch Number\n";
  for (const SideEffect& e : movements) {
    if (!moves(e)) continue;
    const bool charge = *e.kind == FundFlowKind::Debit || *e.kind == FundFlowKind::Capture;
    if (!charge && *e.kind != FundFlowKind::Refund) continue;
    const std::string amount = major(e.amountMinor);
    // A refund is a modification of the payment it gives back: its own reference is the
    // modification's, the payment's PSP reference stands beside it.
    out << "SimCompany,SimMerchant," << (charge ? "" : "psp-") << csv(e.ref) << ','
        << csv(charge ? e.key : e.bizId) << ",alipay," << utc(e.atUnixMs, "%Y-%m-%d %H:%M:%S")
        << ",UTC," << (charge ? "Settled" : "Refunded") << ',' << (charge ? "" : csv(e.ref))
        << ",CNY," << (charge ? "" : amount) << ',' << (charge ? amount : "") << ",1,CNY,"
        << (charge ? "" : amount) << ',' << (charge ? amount : "") << ",0.00,0.00,0.00,0.00,"
        << "alipay," << (charge ? "" : csv(e.key)) << ",1\n";
  }
}

void writeCamt053(std::ostream& out, const std::vector<SideEffect>& movements) {
  const std::int64_t first = movements.empty() ? 0 : movements.front().atUnixMs;
  const std::int64_t last = movements.empty() ? 0 : movements.back().atUnixMs;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\n"
         "  <BkToCstmrStmt>\n"
         "    <GrpHdr><MsgId>SIM-"
      << last << "</MsgId><CreDtTm>" << utc(last, "%Y-%m-%dT%H:%M:%SZ")
      << "</CreDtTm></GrpHdr>\n"
         "    <Stmt>\n"
         "      <Id>SIM-"
      << first << "</Id>\n"
      << "      <FrToDt><FrDtTm>" << utc(first, "%Y-%m-%dT%H:%M:%SZ") << "</FrDtTm><ToDtTm>"
      << utc(last + 1000, "%Y-%m-%dT%H:%M:%SZ") << "</ToDtTm></FrToDt>\n"
      << "      <Acct><Id><IBAN>CN00SIMULATED0001</IBAN></Id><Ccy>CNY</Ccy></Acct>\n";
  for (const SideEffect& e : movements) {
    if (!moves(e)) continue;
    const bool in = *e.kind == FundFlowKind::Debit || *e.kind == FundFlowKind::Capture;
    if (!in && *e.kind != FundFlowKind::Credit) continue;
    const std::string amount = major(e.amountMinor);
    out << "      <Ntry>\n"
        << "        <Amt Ccy=\"CNY\">" << amount << "</Amt>\n"
        << "        <CdtDbtInd>" << (in ? "CRDT" : "DBIT") << "</CdtDbtInd>\n"
        << "        <Sts><Cd>BOOK</Cd></Sts>\n"
        << "        <BookgDt><DtTm>" << utc(e.atUnixMs, "%Y-%m-%dT%H:%M:%SZ")
        << "</DtTm></BookgDt>\n"
        << "        <ValDt><Dt>" << utc(e.atUnixMs, "%Y-%m-%d") << "</Dt></ValDt>\n"
        << "        <AcctSvcrRef>" << xml(e.ref) << "</AcctSvcrRef>\n"
        << "        <NtryDtls><TxDtls>\n"
        << "          <Refs><AcctSvcrRef>" << xml(e.ref) << "</AcctSvcrRef><EndToEndId>"
        << xml(e.key) << "</EndToEndId></Refs>\n"
        << "          <Amt Ccy=\"CNY\">" << amount << "</Amt>\n"
        << "          <RmtInf><Ustrd>" << xml(e.bizType + " " + e.bizId) << "</Ustrd></RmtInf>\n"
        << "        </TxDtls></NtryDtls>\n"
        << "      </Ntry>\n";
  }
  out << "    </Stmt>\n  </BkToCstmrStmt>\n</Document>\n";
}

}  // namespace

void writeStatementFile(const std::string& path, StatementFormat format,
                        const std::vector<SideEffect>& movements) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("simulate: cannot write the statement " + path);
  switch (format) {
    case StatementFormat::StripeItemized:
      writeStripe(out, movements);
      break;
    case StatementFormat::AdyenSettlement:
      writeAdyen(out, movements);
      break;
    case StatementFormat::Camt053:
      writeCamt053(out, movements);
      break;
    default:
      throw std::runtime_error(
          "simulate: the simulated gateway writes stripe, adyen and camt.053 "
          "statements, not " +
          std::string(statementFormatName(format)));
  }
  out.flush();
  if (!out) throw std::runtime_error("simulate: cannot write the statement " + path);
}

}  // namespace idem::sim

// ISO 20022 camt.053 (bank to customer statement) and camt.054 (debit/credit notification), every
// schema version from 02 to 13: one line per entry (Ntry), or per transaction (TxDtls) of an
// entry that books several at once.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <pugixml.hpp>
#include <stdexcept>
#include <vector>

#include "idem/currencies.hpp"
#include "statement_readers.hpp"

namespace idem::statements {
namespace {

constexpr std::string_view kNamespacePrefix = "urn:iso:std:iso:20022:tech:xsd:";
constexpr int kOldestVersion = 2;
constexpr int kNewestVersion = 13;

std::string_view localName(const char* name) {
  const std::string_view n(name);
  const std::size_t colon = n.find(':');
  return colon == std::string_view::npos ? n : n.substr(colon + 1);
}

// Children are looked up by local name: a file may prefix its elements (<ns:Ntry>).
pugi::xml_node child(pugi::xml_node node, std::string_view name) {
  if (!node) return {};
  for (pugi::xml_node c = node.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_element && localName(c.name()) == name) return c;
  }
  return {};
}

pugi::xml_node descendant(pugi::xml_node node, std::initializer_list<std::string_view> path) {
  for (std::string_view name : path) node = child(node, name);
  return node;
}

std::vector<pugi::xml_node> children(pugi::xml_node node, std::string_view name) {
  std::vector<pugi::xml_node> found;
  if (!node) return found;
  for (pugi::xml_node c = node.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_element && localName(c.name()) == name) found.push_back(c);
  }
  return found;
}

std::string_view trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string text(pugi::xml_node node) {
  return std::string(trimmed(node.child_value()));
}

class CamtFile {
 public:
  explicit CamtFile(std::string path) : path_(std::move(path)) {}

  void load() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw StatementError(path_, 0, 0, "cannot open");
    buffer_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw StatementError(path_, 0, 0, "cannot be read");
    std::string_view content = buffer_;
    if (content.starts_with("\xEF\xBB\xBF")) content.remove_prefix(3);
    if (trimmed(content).empty()) throw StatementError(path_, 0, 0, "the file is empty");
    const std::size_t contentEnd = buffer_.find_last_not_of(" \t\r\n") + 1;
    // Line starts are taken before parsing: parsing in place rewrites the buffer.
    lineStarts_.push_back(0);
    for (std::size_t i = 0; i < buffer_.size(); ++i) {
      if (buffer_[i] == '\n') lineStarts_.push_back(i + 1);
    }
    const pugi::xml_parse_result result = document_.load_buffer_inplace(
        buffer_.data(), buffer_.size(), pugi::parse_default, pugi::encoding_utf8);
    if (!result) {
      const auto [line, column] = position(result.offset);
      std::string problem = std::string("XML is not well-formed: ") + result.description();
      // A file cut short fails where it ends, on a tag left open.
      if (static_cast<std::size_t>(result.offset) + 1 >= contentEnd) {
        problem += " (the file ends inside the document: truncated?)";
      }
      throw StatementError(path_, line, column, problem);
    }
  }

  pugi::xml_node root() const { return document_.document_element(); }

  // 1-based line and column of a byte offset.
  std::pair<std::uint64_t, std::uint64_t> position(std::ptrdiff_t offset) const {
    if (offset < 0) return {0, 0};
    const auto at = static_cast<std::size_t>(offset);
    const auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), at);
    const auto line = static_cast<std::uint64_t>(it - lineStarts_.begin());
    return {line, at - *(it - 1) + 1};
  }

  // Where the element's tag opens (its '<').
  std::pair<std::uint64_t, std::uint64_t> position(pugi::xml_node node) const {
    const std::ptrdiff_t offset = node.offset_debug();
    return position(offset > 0 ? offset - 1 : offset);
  }

  [[noreturn]] void fail(pugi::xml_node node, const std::string& problem) const {
    const auto [line, column] = position(node);
    throw StatementError(path_, line, column, problem);
  }

 private:
  std::string path_;
  std::string buffer_;
  std::vector<std::size_t> lineStarts_;
  pugi::xml_document document_;
};

// The version NN of "urn:iso:std:iso:20022:tech:xsd:camt.05X.001.NN" when the message is
// `message`; 0 otherwise.
int namespaceVersion(std::string_view ns, std::string_view message) {
  const std::string expected = std::string(kNamespacePrefix) + std::string(message) + ".001.";
  if (!ns.starts_with(expected)) return 0;
  const std::string_view version = ns.substr(expected.size());
  if (version.size() != 2 || version[0] < '0' || version[0] > '9' || version[1] < '0' ||
      version[1] > '9') {
    return 0;
  }
  return (version[0] - '0') * 10 + (version[1] - '0');
}

std::string versionText(int version) {
  std::string text = std::to_string(version);
  if (text.size() < 2) text.insert(text.begin(), '0');
  return text;
}

// Dt "YYYY-MM-DD" as it is; DtTm "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]" without its fraction, the
// zone as Z or +HH:MM (none when the bank gives none: its local time).
std::string camtDate(const CamtFile& file, pugi::xml_node dateElement, std::string_view what,
                     bool dateOnly) {
  const pugi::xml_node dt = child(dateElement, "Dt");
  if (dt) {
    const std::string value = text(dt);
    const std::optional<CivilTime> t = parseCivilTime(value, "%Y-%m-%d");
    if (!t) file.fail(dt, std::string(what) + "/Dt: '" + value + "' is not a date YYYY-MM-DD");
    return formatDate(*t);
  }
  const pugi::xml_node dtTm = child(dateElement, "DtTm");
  if (!dtTm) file.fail(dateElement, std::string(what) + ": neither Dt nor DtTm");
  const std::string value = text(dtTm);
  const std::string_view v = value;
  std::optional<CivilTime> t =
      v.size() >= 19 ? parseCivilTime(v.substr(0, 19), "%Y-%m-%dT%H:%M:%S") : std::nullopt;
  std::string_view rest = v.size() >= 19 ? v.substr(19) : std::string_view();
  if (!rest.empty() && rest.front() == '.') {
    std::size_t digits = 1;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    rest.remove_prefix(digits);
  }
  std::optional<std::string> zone = std::string();
  if (!rest.empty()) zone = normaliseZone(rest);
  if (!t || !zone) {
    file.fail(dtTm, std::string(what) + "/DtTm: '" + value +
                        "' is not a date-time YYYY-MM-DDTHH:MM:SS with an optional zone");
  }
  return dateOnly ? formatDate(*t) : formatDateTime(*t, *zone);
}

struct Amount {
  std::int64_t minor = 0;
  std::string currency;
};

Amount camtAmount(const CamtFile& file, pugi::xml_node amt, std::string_view what) {
  Amount a;
  std::string code(trimmed(amt.attribute("Ccy").value()));
  for (char& ch : code) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (code.empty()) file.fail(amt, std::string(what) + ": no Ccy attribute");
  if (!isIso4217(code)) {
    file.fail(amt, std::string(what) + ": Ccy '" + code + "' is not an ISO 4217 currency code");
  }
  try {
    a.minor = parseMinorUnits(text(amt), code);
  } catch (const std::invalid_argument& e) {
    file.fail(amt, std::string(what) + ": " + e.what());
  }
  if (a.minor == std::numeric_limits<std::int64_t>::min()) {
    file.fail(amt, std::string(what) + ": outside the ledger's 64-bit range");
  }
  a.minor = std::llabs(a.minor);
  a.currency = std::move(code);
  return a;
}

std::string indicator(const CamtFile& file, pugi::xml_node node, std::string_view what) {
  std::string value = text(node);
  if (value != "CRDT" && value != "DBIT") {
    file.fail(node, std::string(what) + ": '" + value + "', expected CRDT or DBIT");
  }
  return value;
}

void addField(StatementLine& line, std::string name, pugi::xml_node node) {
  if (node) line.fields.emplace_back(std::move(name), text(node));
}

}  // namespace

std::optional<StatementPeriod> readCamt(const std::string& path, StatementFormat format,
                                        const StatementOptions& options, const LineSink& onLine) {
  const bool statement = format == StatementFormat::Camt053;
  const std::string_view message = statement ? "camt.053" : "camt.054";
  CamtFile file(path);
  file.load();
  const pugi::xml_node root = file.root();
  if (localName(root.name()) != "Document") {
    file.fail(root, "the root element is <" + std::string(root.name()) + ">, not <Document>");
  }
  const std::string_view rootName = root.name();
  const std::size_t colon = rootName.find(':');
  const std::string xmlns =
      colon == std::string_view::npos ? "xmlns" : "xmlns:" + std::string(rootName.substr(0, colon));
  const std::string ns = root.attribute(xmlns.c_str()).value();
  const int version = namespaceVersion(ns, message);
  if (version < kOldestVersion || version > kNewestVersion) {
    const std::string found = ns.empty() ? "no namespace" : "the namespace " + ns;
    file.fail(root, "Document has " + found + ", not a " + std::string(message) +
                        " message: " + std::string(message) + " reads " +
                        std::string(kNamespacePrefix) + std::string(message) + ".001." +
                        versionText(kOldestVersion) + " to .001." + versionText(kNewestVersion));
  }

  const std::string_view body = statement ? "BkToCstmrStmt" : "BkToCstmrDbtCdtNtfctn";
  const std::string_view part = statement ? "Stmt" : "Ntfctn";
  const pugi::xml_node messageNode = child(root, body);
  if (!messageNode) file.fail(root, "Document has no " + std::string(body));

  // The period the file declares: that of its statement (or notification). A file of several
  // with different periods declares none: their union may have gaps, and times in different
  // offsets do not compare as text; the importer then takes the period it is given, or none.
  std::optional<StatementPeriod> period;
  bool periodsDiffer = false;
  for (const pugi::xml_node& report : children(messageNode, part)) {
    const pugi::xml_node frToDt = child(report, "FrToDt");
    if (frToDt) {
      const StatementPeriod declared{text(child(frToDt, "FrDtTm")), text(child(frToDt, "ToDtTm"))};
      if (!period) {
        period = declared;
      } else if (period->from != declared.from || period->to != declared.to) {
        periodsDiffer = true;
      }
    }
    const std::string reportId = text(child(report, "Id"));
    const std::string iban = text(descendant(report, {"Acct", "Id", "IBAN"}));

    for (const pugi::xml_node& entry : children(report, "Ntry")) {
      StatementLine line;
      line.sourceLine = file.position(entry).first;
      const pugi::xml_node acctSvcrRef = child(entry, "AcctSvcrRef");
      const pugi::xml_node ntryRef = child(entry, "NtryRef");
      std::string ref = text(acctSvcrRef);
      if (ref.empty()) ref = text(ntryRef);
      if (ref.empty()) file.fail(entry, "Ntry has neither AcctSvcrRef nor NtryRef to identify it");

      const pugi::xml_node amt = child(entry, "Amt");
      if (!amt) file.fail(entry, "Ntry has no Amt");
      const Amount amount = camtAmount(file, amt, "Ntry/Amt");
      const pugi::xml_node cdtDbt = child(entry, "CdtDbtInd");
      if (!cdtDbt) file.fail(entry, "Ntry has no CdtDbtInd");
      const std::string direction = indicator(file, cdtDbt, "Ntry/CdtDbtInd");

      // <Sts>BOOK</Sts> in the older versions, <Sts><Cd>BOOK</Cd></Sts> in the later ones.
      const pugi::xml_node sts = child(entry, "Sts");
      if (!sts) file.fail(entry, "Ntry has no Sts");
      const pugi::xml_node stsCode = child(sts, "Cd");
      const std::string status = stsCode ? text(stsCode) : text(sts);
      line.booked = status == "BOOK";

      const pugi::xml_node bookingDate = child(entry, "BookgDt");
      if (bookingDate) line.bookedAt = camtDate(file, bookingDate, "BookgDt", false);
      const pugi::xml_node valueDate = child(entry, "ValDt");
      if (valueDate) line.valueDate = camtDate(file, valueDate, "ValDt", true);

      const pugi::xml_node domain = descendant(entry, {"BkTxCd", "Domn"});
      if (domain) {
        line.category = text(child(domain, "Cd"));
        const pugi::xml_node family = child(domain, "Fmly");
        if (family) {
          line.category += "/" + text(child(family, "Cd"));
          const pugi::xml_node sub = child(family, "SubFmlyCd");
          if (sub) line.category += "/" + text(sub);
        }
      } else {
        line.category = direction;
      }
      line.amountMinor = amount.minor;
      line.currency = amount.currency;
      line.flowKind = direction == "CRDT" ? options.camtCreditKind : options.camtDebitKind;

      if (!reportId.empty()) line.fields.emplace_back(std::string(part) + "/Id", reportId);
      if (!iban.empty()) line.fields.emplace_back("Acct/Id/IBAN", iban);
      addField(line, "Ntry/NtryRef", ntryRef);
      addField(line, "Ntry/AcctSvcrRef", acctSvcrRef);
      line.fields.emplace_back("Ntry/Amt", text(amt));
      line.fields.emplace_back("Ntry/Amt/@Ccy", amount.currency);
      line.fields.emplace_back("Ntry/CdtDbtInd", direction);
      line.fields.emplace_back("Ntry/Sts", status);
      if (!line.bookedAt.empty()) line.fields.emplace_back("Ntry/BookgDt", line.bookedAt);
      if (!line.valueDate.empty()) line.fields.emplace_back("Ntry/ValDt", line.valueDate);
      if (domain) line.fields.emplace_back("Ntry/BkTxCd", line.category);

      std::vector<pugi::xml_node> transactions;
      for (const pugi::xml_node& details : children(entry, "NtryDtls")) {
        for (const pugi::xml_node& tx : children(details, "TxDtls")) transactions.push_back(tx);
      }
      // The transaction's own references: the key its initiator gave, the bank's reference.
      const auto describe = [&](StatementLine& l, pugi::xml_node tx) {
        const pugi::xml_node refs = child(tx, "Refs");
        const std::string endToEnd = text(child(refs, "EndToEndId"));
        l.idempotencyKey = endToEnd == "NOTPROVIDED" ? std::string() : endToEnd;
        const std::string txRef = text(child(refs, "AcctSvcrRef"));
        l.gatewayRef = txRef.empty() ? ref : txRef;
        if (refs) {
          for (pugi::xml_node r = refs.first_child(); r; r = r.next_sibling()) {
            if (r.type() != pugi::node_element) continue;
            l.fields.emplace_back("TxDtls/Refs/" + std::string(localName(r.name())), text(r));
          }
        }
        for (const pugi::xml_node& ustrd : children(child(tx, "RmtInf"), "Ustrd")) {
          l.fields.emplace_back("TxDtls/RmtInf/Ustrd", text(ustrd));
        }
      };

      if (transactions.size() <= 1) {
        line.lineId = ref;
        if (transactions.empty()) {
          line.gatewayRef = ref;
        } else {
          describe(line, transactions.front());
        }
        onLine(std::move(line));
        continue;
      }
      // A batch booking: one line per transaction, each with its own amount.
      for (std::size_t i = 0; i < transactions.size(); ++i) {
        const pugi::xml_node tx = transactions[i];
        StatementLine txLine = line;
        txLine.sourceLine = file.position(tx).first;
        txLine.lineId = ref + "/" + std::to_string(i + 1);
        pugi::xml_node txAmt = child(tx, "Amt");
        if (!txAmt) txAmt = descendant(tx, {"AmtDtls", "TxAmt", "Amt"});
        if (!txAmt) {
          file.fail(tx, "TxDtls " + std::to_string(i + 1) + " of a batch entry has no amount " +
                            "(Amt or AmtDtls/TxAmt/Amt)");
        }
        const Amount txAmount = camtAmount(file, txAmt, "TxDtls/Amt");
        txLine.amountMinor = txAmount.minor;
        txLine.currency = txAmount.currency;
        const pugi::xml_node txCdtDbt = child(tx, "CdtDbtInd");
        if (txCdtDbt) {
          const std::string txDirection = indicator(file, txCdtDbt, "TxDtls/CdtDbtInd");
          txLine.flowKind = txDirection == "CRDT" ? options.camtCreditKind : options.camtDebitKind;
          if (!domain) txLine.category = txDirection;
        }
        txLine.fields.emplace_back("TxDtls/Amt", text(txAmt));
        describe(txLine, tx);
        // Without a bank reference of its own, the transaction is known by its line id: the
        // batch's entry reference alone would name every one of them.
        if (child(child(tx, "Refs"), "AcctSvcrRef").empty()) txLine.gatewayRef = txLine.lineId;
        onLine(std::move(txLine));
      }
    }
  }
  if (periodsDiffer) return std::nullopt;
  return period;
}

}  // namespace idem::statements

// The gateway's word, from the command line: `idemctl import-statement` (a statement file, once per
// file, in one transaction), `idemctl ingest-callback` (one webhook event, once per event id) and
// `idemctl declare-gateway` (what a gateway carries and whether its final statements' silence is
// evidence). The first two run as a login granted idem_ledger, the third as the schema's owner.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <pqxx/pqxx>

#include "database_flags.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/currencies.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"
#include "idem/session_role.hpp"
#include "idemctl.hpp"
#include "statement_import.hpp"

namespace idem::ctl {
namespace {

void requireLedger(pqxx::connection& connection, const char* what) {
  const SessionRole session = sessionMembership(connection, "idem_ledger", what);
  if (!session.member) {
    throw DatabaseError("42501", std::string(what) + ": the login " + session.login +
                                     " is not a member of idem_ledger; the gateway's word is "
                                     "recorded by a login granted idem_ledger");
  }
}

void printReport(std::ostream& out, const StatementImportRequest& request,
                 const StatementImportReport& r) {
  if (r.alreadyImported) {
    out << request.path << ": already imported as statement " << r.statementId << " (sha256 "
        << r.sha256 << "); nothing changed\n";
    return;
  }
  out << request.path << ": imported as statement " << r.statementId << " of " << request.gateway
      << " (" << statementFormatName(request.format) << (request.final ? ", final" : "")
      << "): " << r.lines << " line(s), " << r.newLines << " new, " << r.lines - r.newLines
      << " already held\n"
      << "  matched " << r.matched << ", mismatched " << r.mismatched << ", unmatched "
      << r.unmatched << ", duplicate " << r.duplicate << ", not a flow " << r.notAFlow
      << ", pending " << r.pending << "\n"
      << "  resolved " << r.resolvedSuccess << " record(s) SUCCESS, " << r.resolvedFailed
      << " FAILED\n";
  for (const NeedsPerson& n : r.needsPerson) {
    out << "  line " << n.sourceLine << " (" << n.lineId << "): " << n.result << ": " << n.detail
        << "\n";
  }
  const std::int64_t shown = static_cast<std::int64_t>(r.needsPerson.size());
  const std::int64_t needing = r.mismatched + r.unmatched + r.duplicate;
  if (needing > shown) out << "  and " << needing - shown << " more for a person\n";
}

// A file, or every file of a folder (a drop folder the gateway's files land in), by name; hidden
// files and files still being written (*.partial) wait. Each is imported once whatever how often
// the folder is read: a file imported before changes nothing.
std::vector<std::string> statementFiles(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return {path};
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.starts_with('.') || name.ends_with(".partial")) continue;
    files.push_back(entry.path().string());
  }
  if (error) throw StatementError(path, 0, 0, "the folder cannot be read: " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

int runImportStatement(const std::vector<std::string>& args, Streams streams,
                       const std::atomic<bool>& /*stop*/) {
  std::vector<std::string> files;
  std::string format, gateway;
  std::optional<std::string> dsn, mapping, periodFrom, periodTo, keyMetadata, creditKind, debitKind;
  bool final = false;
  CommandLine cli(
      "idemctl import-statement",
      "idemctl import-statement FILE|FOLDER --format F --gateway NAME [flags]",
      "Imports a gateway's statement: each line once (a line already held from an "
      "earlier file is the\nsame line), the whole file in one transaction or nothing "
      "of it. Charge and refund lines are\nmatched to records by the idempotency key "
      "the client put at the gateway, else the gateway\nreference of a recorded flow, "
      "else the business object; a matched line becomes a fund flow\nand resolves an "
      "UNKNOWN record SUCCESS. A FOLDER imports each of its files by name, each\nonce (a "
      "drop folder read again changes nothing). Runs as a login granted "
      "idem_ledger.\nFormats: " +
          statementFormatNames() +
          " (docs/statements.md).\nExit codes: 0 imported (or imported before), 1 "
          "failed (a malformed file: FILE:LINE:COLUMN and what;\nnothing of it imported, the "
          "folder's other files still are), 2 usage.");
  cli.positionals(files, 1);
  cli.text("format", "F", "the file's format: " + statementFormatNames(), format);
  cli.text("gateway", "NAME", "the gateway the statement is from, e.g. stripe", gateway);
  cli.text("mapping", "FILE", "csv: the YAML mapping of its columns", mapping);
  cli.text("period-from", "TIME",
           "the period the statement covers begins (ISO 8601; default: the file's own, else its "
           "lines' span)",
           periodFrom);
  cli.text("period-to", "TIME", "the period ends (exclusive)", periodTo);
  cli.flag("final", "the gateway declares the period final: nothing more will be booked in it",
           final);
  cli.text("key-metadata", "KEY",
           "stripe: the payment_metadata[KEY] column holding the idempotency key (default "
           "idempotency_key)",
           keyMetadata);
  cli.text("camt-credit-kind", "KIND", "camt: the flow a CRDT entry is (default DEBIT)",
           creditKind);
  cli.text("camt-debit-kind", "KIND", "camt: the flow a DBIT entry is (default CREDIT)", debitKind);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  if (files.size() != 1) throw UsageError("name one statement file or folder");
  StatementImportRequest request;
  request.path = files.front();
  const std::optional<StatementFormat> f = statementFormatFromName(format);
  if (!f) {
    throw UsageError(format.empty() ? "--format is required: " + statementFormatNames()
                                    : "unknown format '" + format + "': expected one of " +
                                          statementFormatNames());
  }
  request.format = *f;
  if (gateway.empty()) throw UsageError("--gateway is required (the gateway's name, e.g. stripe)");
  request.gateway = gateway;
  if (request.format == StatementFormat::MappedCsv && !mapping)
    throw UsageError("--format csv needs --mapping FILE (docs/statements.md)");
  if (mapping) request.options.mappingFile = *mapping;
  if (keyMetadata) request.options.keyMetadata = *keyMetadata;
  if (creditKind) request.options.camtCreditKind = *creditKind;
  if (debitKind) request.options.camtDebitKind = *debitKind;
  if (periodFrom.has_value() != periodTo.has_value())
    throw UsageError("--period-from and --period-to come together");
  if (final && !periodFrom && request.format != StatementFormat::Camt053 &&
      request.format != StatementFormat::Camt054) {
    throw UsageError("--final needs the period it is final for (--period-from, --period-to)");
  }
  request.periodFrom = periodFrom;
  request.periodTo = periodTo;
  request.final = final;

  auto connection = connect(connectionFrom(dsn, "idemctl import-statement"));
  requireLedger(*connection, "import-statement");
  int status = kOk;
  for (const std::string& path : statementFiles(request.path)) {
    request.path = path;
    try {
      printReport(streams.out, request, importStatement(*connection, request));
    } catch (const StatementError& e) {
      streams.err << "idemctl import-statement: " << e.what()
                  << "; nothing of the file was imported\n";
      status = kFailed;
    } catch (const DatabaseError& e) {
      if (e.endsSession()) throw;
      streams.err << "idemctl import-statement: " << e.what() << "\n";
      status = kFailed;
    }
  }
  return status;
}

constexpr const char* kIngestCallback =
    "SELECT result, record_key, flow_id, record_status, already_received "
    "FROM idem.ingest_callback($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)";

int runIngestCallback(const std::vector<std::string>& args, Streams streams,
                      const std::atomic<bool>& /*stop*/) {
  std::string gateway, eventId, kind, amount, currency;
  std::optional<std::string> dsn, ref, key, bizId, payload;
  CommandLine cli("idemctl ingest-callback",
                  "idemctl ingest-callback --gateway NAME --event-id ID --kind K --amount A "
                  "--currency C [flags]",
                  "Records a gateway's webhook event in the same idempotency context as the call "
                  "it reports: once\nper event id (a re-delivery changes nothing and prints what "
                  "the first found); its flow is\nrecorded under the gateway's reference, the same "
                  "flow the statement line of that side effect\nbecomes; a callback for an UNKNOWN "
                  "record resolves it SUCCESS when amount and currency agree.\nRuns as a login "
                  "granted idem_ledger. Exit codes: 0 recorded (whatever matching found),\n1 "
                  "failed, 2 usage.");
  cli.text("gateway", "NAME", "the gateway that sent it", gateway);
  cli.text("event-id", "ID", "the event's id at the gateway (evt_..., a notify id)", eventId);
  cli.text("kind", "K", "the side effect it reports: DEBIT, CAPTURE, REFUND, CREDIT", kind);
  cli.text("amount", "A", "the amount in major units as the gateway wrote it, e.g. 29.90", amount);
  cli.text("currency", "C", "ISO 4217 code, e.g. CNY", currency);
  cli.text("ref", "REF", "the gateway's reference of the side effect (ch_..., a transaction id)",
           ref);
  cli.text("key", "KEY", "the idempotency key the client put at the gateway", key);
  cli.text("biz-id", "ID", "the business object the event names", bizId);
  cli.text("payload", "JSON", "the event as received, kept as evidence", payload);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  for (const auto& [flag, value] : {std::pair{"--gateway", &gateway},
                                    {"--event-id", &eventId},
                                    {"--kind", &kind},
                                    {"--amount", &amount},
                                    {"--currency", &currency}}) {
    if (value->empty()) throw UsageError(std::string(flag) + " is required");
  }
  std::int64_t amountMinor = 0;
  try {
    amountMinor = parseMinorUnits(amount, currency);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--amount: ") + e.what());
  }
  if (amountMinor < 0)
    throw UsageError("--amount: the direction is the kind; give the amount without a sign");
  if (payload && !nlohmann::json::accept(*payload)) throw UsageError("--payload is not JSON");
  if (!ref && !key && !bizId)
    throw UsageError("name the call the event reports: --key, --ref or --biz-id");

  auto connection = connect(connectionFrom(dsn, "idemctl ingest-callback"));
  requireLedger(*connection, "ingest-callback");
  const pqxx::row r = translatingErrors("ingest-callback", [&] {
    Work tx(*connection);
    const pqxx::row row = tx.exec_params1(kIngestCallback, gateway, eventId, kind, amountMinor,
                                          currency, ref, key, bizId, payload.value_or("{}"));
    tx.commit();
    return row;
  });
  streams.out << "callback " << eventId << " of " << gateway << ": "
              << (r[4].as<bool>() ? "received before, " : "") << r[0].c_str();
  if (!r[1].is_null()) streams.out << ", record " << r[1].c_str();
  if (!r[3].is_null()) streams.out << " (" << r[3].c_str() << ")";
  if (!r[2].is_null()) streams.out << ", flow " << r[2].c_str();
  streams.out << "\n";
  return kOk;
}

int runDeclareGateway(const std::vector<std::string>& args, Streams streams,
                      const std::atomic<bool>& /*stop*/) {
  std::vector<std::string> names, bizTypes;
  std::optional<std::string> dsn;
  std::chrono::milliseconds delay = std::chrono::hours(72);
  std::chrono::milliseconds notFoundAfter = std::chrono::minutes(10);
  bool absence = false;
  CommandLine cli("idemctl declare-gateway", "idemctl declare-gateway NAME [flags]",
                  "Declares what a gateway carries and how far its statements may be trusted. "
                  "Runs as the schema's\nowner. --absence-is-evidence lets a final statement "
                  "without a line for an UNKNOWN record of\nthese business types resolve it "
                  "FAILED, once the settlement delay has passed, and never when\nmoney moved for "
                  "the business object by any other route. Exit codes: 0 declared, 1 failed, 2 "
                  "usage.");
  cli.positionals(names, 1);
  cli.list("biz-types", "T,...", "the business types whose side effects it carries", bizTypes);
  cli.duration("settlement-delay",
               "how long a side effect takes to reach its statement (default 72h)", delay);
  cli.flag("absence-is-evidence", "a final statement's silence resolves FAILED (default off)",
           absence);
  cli.duration("not-found-after",
               "how old a record's last change must be before the gateway's status answer \"did "
               "not happen\" decides it FAILED; younger, the gateway may not have recorded the "
               "call yet (default 10m)",
               notFoundAfter);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  if (names.size() != 1) throw UsageError("name one gateway");
  if (absence && bizTypes.empty())
    throw UsageError("--absence-is-evidence needs --biz-types: absence proves nothing else");
  std::string joined;
  for (const std::string& t : bizTypes) joined += (joined.empty() ? "" : ",") + t;
  auto connection = connect(connectionFrom(dsn, "idemctl declare-gateway"));
  translatingErrors("declare-gateway", [&] {
    Work tx(*connection);
    // Business type names hold no comma (A-Z a-z 0-9 _ . -): the database says so of any other.
    tx.exec_params(
        "SELECT idem.declare_gateway($1, coalesce(string_to_array(nullif($2, ''), ','), '{}'), "
        "make_interval(secs => $3), $4, make_interval(secs => $5))",
        names.front(), joined, static_cast<double>(delay.count()) / 1000.0, absence,
        static_cast<double>(notFoundAfter.count()) / 1000.0);
    tx.commit();
  });
  streams.out << "gateway " << names.front() << ": carries "
              << (joined.empty() ? std::string("no declared business type") : joined)
              << "; settlement delay " << formatDuration(delay) << "; absence is "
              << (absence ? "" : "not ") << "evidence; \"did not happen\" counts after "
              << formatDuration(notFoundAfter) << "\n";
  return kOk;
}

[[maybe_unused]] const bool registeredImport = registerCommand(
    {.name = "import-statement",
     .arguments = "FILE",
     .summary = "import a gateway's statement (stripe, camt.053/054, adyen, csv) once;\n"
                "its lines decide the UNKNOWN records they match (idem_ledger)",
     .order = 45,
     .run = runImportStatement});

[[maybe_unused]] const bool registeredCallback = registerCommand(
    {.name = "ingest-callback",
     .summary = "record a gateway's webhook event once; it decides the UNKNOWN record\n"
                "it reports (idem_ledger)",
     .order = 46,
     .run = runIngestCallback});

[[maybe_unused]] const bool registeredGateway = registerCommand(
    {.name = "declare-gateway",
     .arguments = "NAME",
     .summary = "declare what a gateway carries, its settlement delay, and whether\n"
                "its final statements' silence is evidence (owner)",
     .order = 47,
     .run = runDeclareGateway});

}  // namespace
}  // namespace idem::ctl

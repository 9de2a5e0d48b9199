#include <ostream>

#include "database_flags.hpp"
#include "idem/settlement.hpp"
#include "idemctl.hpp"

namespace idem::ctl {
namespace {

// The exit codes for the help: the fixed three, then one per refusal, from the vocabulary.
std::string exitCodes() {
  std::string out =
      "exit codes:\n"
      "  0  settled (or corrected FAILED -> SUCCESS)\n"
      "  1  failed: the database could not be reached or answered with an error\n"
      "  2  usage: a flag is missing or wrong, a blank reason, evidence that is not JSON\n";
  for (const auto& [code, help] : kSettleRefusals) {
    // Wrapped at 100 columns, continued under the text.
    std::string line =
        "  " + std::to_string(exitCodeOf(code)) + "  refused, " + std::string(format(code)) + ":";
    std::size_t at = 0;
    while (at < help.size()) {
      std::size_t end = help.find(' ', at);
      if (end == std::string_view::npos) end = help.size();
      const std::string_view word = help.substr(at, end - at);
      if (line.size() + 1 + word.size() > 100) {
        out += line + "\n";
        line = "    ";
      }
      line += " ";
      line += word;
      at = end + 1;
    }
    out += line + "\n";
  }
  return out + "A refused settle writes nothing.\n";
}

void printChanges(std::ostream& err, const std::vector<Transition>& changes) {
  for (const Transition& t : changes) {
    err << "  version " << t.version << ": " << (t.fromStatus ? format(*t.fromStatus) : "(created)")
        << " -> " << format(t.toStatus) << " by " << t.actor << " (" << format(t.actorKind) << ")"
        << (t.reason ? ": " + *t.reason : std::string()) << "\n";
  }
}

void printFlows(std::ostream& err, const std::vector<FundFlow>& flows) {
  for (const FundFlow& f : flows) {
    err << "  flow " << f.id << ": " << format(f.kind) << " " << f.amountMinor << " " << f.currency
        << " (minor units), ref " << f.externalRef
        << (f.idempotencyKey ? ", key " + *f.idempotencyKey : std::string())
        << (f.isDuplicate() ? ", duplicate of flow " + std::to_string(*f.duplicateOf)
                            : std::string())
        << "\n";
  }
}

int runSettle(const std::vector<std::string>& args, Streams streams,
              const std::atomic<bool>& /*stop*/) {
  std::optional<std::string> to, reason, evidence, dsn;
  std::optional<int> expectVersion;
  bool overrideSideEffect = false, overrideMoneyMoved = false, overrideDebitWarning = false;
  std::vector<std::string> keys;
  CommandLine cli("idemctl settle", "idemctl settle KEY --to SUCCESS|FAILED --reason TEXT [flags]",
                  exitCodes());
  cli.text("to", "SUCCESS|FAILED", "the decision", to);
  cli.text("reason", "TEXT", "why: the evidence the decision rests on (required)", reason);
  cli.text("evidence", "JSON", "supporting evidence, e.g. '{\"gateway_ref\": \"...\"}'", evidence);
  cli.integer("expect-version", "N",
              "the version you looked at; refused if the record changed since (default: current)",
              expectVersion, 1, 1'000'000'000);
  cli.flag("override-side-effect",
           "settle FAILED although the ledger records the side effect (only when the downstream "
           "confirms in writing that it did not happen, or was undone; quote it in --reason); the "
           "evidence records the override",
           overrideSideEffect);
  cli.flag("override-money-moved", "the former name of --override-side-effect", overrideMoneyMoved);
  cli.flag("override-debit-warning", "deprecated: the first name of --override-side-effect",
           overrideDebitWarning);
  declareDsn(cli, dsn);
  cli.positionals(keys);
  if (!cli.parse(args, streams.out)) return kOk;
  if (keys.size() != 1) {
    throw UsageError(
        "needs exactly one idempotency key, e.g. idemctl settle pay-42:pay:1 --to FAILED "
        "--reason '...'");
  }
  if (!to) throw UsageError("--to is required (SUCCESS or FAILED)");
  if (!reason) throw UsageError("--reason is required: say what evidence the decision rests on");

  SettleRequest request;
  request.key = keys.front();
  const auto status = tryParse<RecordStatus>(*to);
  if (!status || (*status != RecordStatus::Success && *status != RecordStatus::Failed)) {
    throw badValue("to", "SUCCESS or FAILED", *to);
  }
  request.to = *status;
  request.reason = *reason;
  request.evidence = evidence;
  if (expectVersion) request.expectedVersion = *expectVersion;
  if (overrideDebitWarning || overrideMoneyMoved) {
    streams.err << "idemctl settle: --override-"
                << (overrideMoneyMoved ? "money-moved" : "debit-warning")
                << " is deprecated, use --override-side-effect (it covers every business type's "
                   "side effect, not only a charge)\n";
  }
  request.overrideSideEffect = overrideSideEffect || overrideMoneyMoved || overrideDebitWarning;

  auto connection = connect(connectionFrom(dsn, "idemctl settle"));
  const SettleOutcome outcome = settleRecord(*connection, request);
  const bool refused =
      outcome.verdict != SettleVerdict(ResultCode::Ok) && outcome.verdict != kSettleInputRefused;
  // On a refusal the message says what matters; the other warnings would only bury it.
  if (!refused) {
    for (const std::string& warning : outcome.assessment.warnings) {
      streams.err << "warning: " << warning << "\n";
    }
  }
  if (outcome.verdict == kSettleInputRefused) throw UsageError(outcome.message);
  const ResultCode result = *outcome.verdict;
  if (result == ResultCode::Ok) {
    streams.out << outcome.message << "\n";
    return kOk;
  }
  // A refusal: the server's sentence, what it rests on, and the result code's exit code.
  streams.err << "idemctl settle: " << outcome.message << "\n";
  if (result == ResultCode::Conflict) printChanges(streams.err, outcome.changesSince);
  if (result == ResultCode::SideEffectRecorded) {
    printFlows(streams.err, outcome.assessment.flows);
    streams.err << "  to override: --override-side-effect, with a --reason that quotes the "
                   "downstream's confirmation\n";
  }
  const int code = exitCodeOf(result);
  return code < 0 ? kFailed : code;
}

[[maybe_unused]] const bool registered =
    registerCommand({.name = "settle",
                     .arguments = "KEY",
                     .summary = "settle a stuck record to SUCCESS or FAILED, or correct FAILED to\n"
                                "SUCCESS (operators)",
                     .order = 30,
                     .run = runSettle});

}  // namespace

}  // namespace idem::ctl

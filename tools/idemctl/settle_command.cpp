#include <ostream>

#include "database_flags.hpp"
#include "idem/settlement.hpp"
#include "idemctl.hpp"

namespace idem::ctl {

int runSettle(const std::vector<std::string>& args, Streams streams) {
  const std::vector<FlagSpec> specs{
      {"to", true, "SUCCESS|FAILED", "the decision"},
      {"reason", true, "TEXT", "why: the evidence the decision rests on (required)"},
      {"evidence", true, "JSON", "supporting evidence, e.g. '{\"gateway_ref\": \"...\"}'"},
      {"expect-version", true, "N",
       "the version you looked at; refused if the record changed since (default: current)"},
      {"override-debit-warning", false, "",
       "settle FAILED although a DEBIT flow exists (only after the gateway confirms no charge)"},
      dsnFlag(),
      helpFlag()};
  const CommandLine cli(args, specs);
  if (cli.has("help")) {
    streams.out << "usage: idemctl settle KEY --to SUCCESS|FAILED --reason TEXT [flags]\n\n"
                << CommandLine::describe(specs);
    return kOk;
  }
  if (cli.positionals().size() != 1) {
    throw UsageError("needs exactly one idempotency key, e.g. idemctl settle pay-42:pay:1 --to FAILED --reason '...'");
  }
  if (!cli.has("to")) throw UsageError("--to is required (SUCCESS or FAILED)");
  if (!cli.has("reason")) throw UsageError("--reason is required: say what evidence the decision rests on");

  SettleRequest request;
  request.key = cli.positionals().front();
  const auto to = tryParse<RecordStatus>(*cli.value("to"));
  if (!to || (*to != RecordStatus::Success && *to != RecordStatus::Failed)) {
    throw UsageError("--to must be SUCCESS or FAILED, got '" + *cli.value("to") + "'");
  }
  request.to = *to;
  request.reason = *cli.value("reason");
  request.evidence = cli.value("evidence");
  if (auto v = cli.integer("expect-version", 1, 1'000'000'000)) request.expectedVersion = static_cast<int>(*v);
  request.overrideDebitWarning = cli.has("override-debit-warning");

  auto connection = connect(connectionFrom(cli, "idemctl settle"));
  const SettleOutcome outcome = settleRecord(*connection, request);
  for (const std::string& warning : outcome.assessment.warnings) {
    if (outcome.verdict != SettleVerdict::NeedsOverride) streams.err << "warning: " << warning << "\n";
  }
  switch (outcome.verdict) {
    case SettleVerdict::Settled:
      streams.out << outcome.message << "\n";
      return kOk;
    case SettleVerdict::InvalidInput:
      throw UsageError(outcome.message);
    case SettleVerdict::Conflict:
      streams.err << "refused: " << outcome.message << "\n";
      for (const Transition& t : outcome.changesSince) {
        streams.err << "  version " << t.version << ": "
                    << (t.fromStatus ? format(*t.fromStatus) : "(created)") << " -> "
                    << format(t.toStatus) << " by " << t.actor << " (" << format(t.actorKind)
                    << ")" << (t.reason ? ": " + *t.reason : std::string()) << "\n";
      }
      return kRefused;
    case SettleVerdict::NeedsOverride:
    case SettleVerdict::NotFound:
    case SettleVerdict::InvalidTransition:
      streams.err << "refused: " << outcome.message << "\n";
      return kRefused;
  }
  return kFailed;
}

}  // namespace idem::ctl

// idemctl doctor: a live deployment against the durability contract, one line per finding.
#include <nlohmann/json.hpp>
#include <ostream>

#include "database_flags.hpp"
#include "idem/durability.hpp"
#include "idemctl.hpp"

namespace idem::ctl {
namespace {

int runDoctor(const std::vector<std::string>& args, Streams streams,
              const std::atomic<bool>& /*stop*/) {
  std::optional<std::string> dsn;
  bool json = false;
  CommandLine cli(
      "idemctl doctor", "idemctl doctor [flags]",
      "Checks the server the DSN reaches against the durability contract (docs/contract/"
      "schema.md,\n\"Durability\"): fsync, full_page_writes, synchronous_commit as the "
      "protocol's logins start with it,\nwhether this primary's standbys include a synchronous "
      "one, inactive replication slots and the\nclock. One line per finding: ok, note or "
      "PROBLEM, and what to change. Exits 1 when a finding\nis a problem. Run it as a login "
      "granted pg_monitor, so that it sees the standbys' state.");
  cli.flag("json", "print the findings as one JSON document instead", json);
  declareDsn(cli, dsn);
  if (!cli.parse(args, streams.out)) return kOk;
  auto connection = connect(connectionFrom(dsn, "idemctl doctor"));
  const DurabilityFacts facts = readDurabilityFacts(*connection);
  const std::vector<DurabilityFinding> findings = durabilityFindings(facts);
  bool problem = false;
  for (const DurabilityFinding& f : findings) problem |= f.level == FindingLevel::Problem;
  if (json) {
    nlohmann::json out = {{"server",
                           {{"host", connection->hostname() ? connection->hostname() : ""},
                            {"port", connection->port() ? connection->port() : ""},
                            {"standby", facts.standby}}},
                          {"problems", problem},
                          {"findings", nlohmann::json::array()}};
    for (const DurabilityFinding& f : findings) {
      out["findings"].push_back(
          {{"check", f.check}, {"level", findingLevelName(f.level)}, {"text", f.text}});
    }
    streams.out << out.dump(2) << "\n";
  } else {
    for (const DurabilityFinding& f : findings) {
      char level[16];
      std::snprintf(level, sizeof level, "%-8s", findingLevelName(f.level));
      streams.out << level << f.check << ": " << f.text << "\n";
    }
  }
  return problem ? kFailed : kOk;
}

[[maybe_unused]] const bool registered =
    registerCommand({.name = "doctor",
                     .summary = "check a live server against the durability contract (fsync,\n"
                                "synchronous commit and standbys, slots, clock)",
                     .order = 70,
                     .run = runDoctor});

}  // namespace

}  // namespace idem::ctl

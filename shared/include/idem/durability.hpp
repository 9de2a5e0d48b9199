// The durability contract checked against a live server (docs/contract/schema.md, "Durability"):
// an acknowledged claim or decision must survive a crash of the server and, where it is
// replicated, a failover. What the server says about itself is read once (DurabilityFacts); the
// findings are derived from it, so that `idemctl doctor` and the exporter's gauges say the same.
#pragma once

#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

namespace idem {

struct ProtocolLoginSetting {
  std::string login;  // a login role granted one of the protocol's groups (idem_writer, ...)
  std::string synchronousCommit;  // as its sessions in this database start with it
  std::string from;  // where that value comes from: "role in this database", "role", ...
};

struct ReplicationSlotFacts {
  std::string name;
  bool active = false;
  std::optional<double> retainedBytes;  // WAL the slot holds back; unknown on a standby
};

struct DurabilityFacts {
  bool standby = false;  // pg_is_in_recovery()
  std::string fsync;
  std::string fullPageWrites;
  std::string synchronousCommit;  // the server's value, as a session without overrides sees it
  std::string synchronousStandbyNames;
  int standbys = 0;  // WAL senders streaming to a standby (pg_stat_replication)
  // Of them, those the primary waits for (sync_state sync or quorum); unknown when this login may
  // not read the standbys' state (it needs pg_monitor or pg_read_all_stats).
  std::optional<int> synchronousStandbys;
  std::vector<ProtocolLoginSetting> protocolLogins;
  std::vector<ReplicationSlotFacts> slots;
  double clockSkewSeconds = 0;  // the server's clock minus this machine's
};

// Reads the facts in one read-only transaction. Throws DatabaseError.
DurabilityFacts readDurabilityFacts(pqxx::connection& connection);

enum class FindingLevel { Ok, Note, Problem };

struct DurabilityFinding {
  std::string check;  // a stable name: fsync, full_page_writes, synchronous_commit, ...
  FindingLevel level = FindingLevel::Ok;
  std::string text;  // one sentence: what was found and, unless ok, what to change
};

// The checks, always in the same order, one finding each (synchronous_commit: one per login whose
// value is not the server's, after the server's own). A clock further off than this is a problem.
inline constexpr double kClockSkewProblemSeconds = 1.0;
std::vector<DurabilityFinding> durabilityFindings(const DurabilityFacts& facts);

// The checks' names, in order, for the exporter's labels.
const std::vector<std::string>& durabilityCheckNames();

const char* findingLevelName(FindingLevel level);

}  // namespace idem

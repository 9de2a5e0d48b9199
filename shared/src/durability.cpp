#include "idem/durability.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"

namespace idem {
namespace {

// The server's settings and replication as any login may see them; the standbys' sync state only
// with pg_read_all_stats (pg_monitor), NULL otherwise.
constexpr const char* kServerFacts = R"SQL(
SELECT pg_catalog.pg_is_in_recovery(),
       pg_catalog.current_setting('fsync'),
       pg_catalog.current_setting('full_page_writes'),
       (SELECT coalesce(reset_val, setting) FROM pg_catalog.pg_settings
         WHERE name = 'synchronous_commit'),
       pg_catalog.current_setting('synchronous_standby_names'),
       (SELECT count(*) FROM pg_catalog.pg_stat_replication),
       (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
         OR pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       (SELECT count(*) FROM pg_catalog.pg_stat_replication
         WHERE sync_state IN ('sync', 'quorum')),
       extract(epoch FROM pg_catalog.clock_timestamp())::float8
)SQL";

// Each login granted a protocol group whose sessions in this database start with a
// synchronous_commit of their own (ALTER ROLE ... SET, ALTER DATABASE ... SET), and where from.
constexpr const char* kProtocolLogins = R"SQL(
WITH here AS (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()),
     overrides AS (
       SELECT s.setrole, s.setdatabase, substring(c FROM length('synchronous_commit=') + 1) AS value
         FROM pg_catalog.pg_db_role_setting AS s, unnest(s.setconfig) AS c
        WHERE c LIKE 'synchronous\_commit=%'),
     groups AS (
       SELECT oid FROM pg_catalog.pg_roles
        WHERE rolname IN ('idem_writer', 'idem_ledger', 'idem_operator', 'idem_reconciler'))
SELECT r.rolname, o.value,
       CASE WHEN o.setrole <> 0 AND o.setdatabase <> 0 THEN 'role in this database'
            WHEN o.setrole <> 0 THEN 'role'
            ELSE 'database' END
  FROM pg_catalog.pg_roles AS r
  CROSS JOIN LATERAL (
       SELECT value, setrole, setdatabase FROM overrides
        WHERE (setrole = r.oid AND setdatabase IN ((SELECT oid FROM here), 0))
           OR (setrole = 0 AND setdatabase = (SELECT oid FROM here))
        ORDER BY setrole = r.oid DESC, setdatabase <> 0 DESC
        LIMIT 1) AS o
 WHERE r.rolcanlogin AND NOT r.rolsuper
   AND EXISTS (SELECT 1 FROM groups AS g WHERE pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER'))
 ORDER BY r.rolname
)SQL";

constexpr const char* kSlots = R"SQL(
SELECT slot_name, active,
       CASE WHEN pg_catalog.pg_is_in_recovery() OR restart_lsn IS NULL THEN NULL
            ELSE pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn)::float8 END
  FROM pg_catalog.pg_replication_slots
 ORDER BY slot_name
)SQL";

// An inactive slot holding this much WAL back is a problem, not a note: it grows until the disk
// fills and the primary stops.
constexpr double kSlotProblemBytes = 1024.0 * 1024 * 1024;

double unixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f MB", bytes / (1024 * 1024));
  return text;
}

// What a synchronous_commit value means for the contract, or nothing when it keeps it.
std::optional<DurabilityFinding> judgeSynchronousCommit(const std::string& value, bool replicated,
                                                        const std::string& who) {
  if (value == "off") {
    return DurabilityFinding{
        "synchronous_commit", FindingLevel::Problem,
        who +
            " has synchronous_commit = off: a crash of PostgreSQL loses the last claims it "
            "acknowledged, and their retries run again; set synchronous_commit = on"};
  }
  if (value == "local" && replicated) {
    return DurabilityFinding{
        "synchronous_commit", FindingLevel::Problem,
        who +
            " has synchronous_commit = local: commits are acknowledged before a standby has "
            "them, so a failover can lose acknowledged claims; set synchronous_commit = on"};
  }
  if (value == "remote_write" && replicated) {
    return DurabilityFinding{
        "synchronous_commit", FindingLevel::Note,
        who +
            " has synchronous_commit = remote_write: a claim survives the primary's crash but "
            "not the primary and its synchronous standby failing at once; on keeps it on the "
            "standby's disk"};
  }
  return std::nullopt;
}

}  // namespace

DurabilityFacts readDurabilityFacts(pqxx::connection& connection) {
  return translatingErrors("read the server's durability settings", [&] {
    ReadTransaction tx(connection);
    DurabilityFacts f;
    const auto before = std::chrono::system_clock::now();
    const pqxx::row s = tx.exec1(kServerFacts);
    const auto after = std::chrono::system_clock::now();
    f.standby = s[0].as<bool>();
    f.fsync = s[1].c_str();
    f.fullPageWrites = s[2].c_str();
    f.synchronousCommit = s[3].c_str();
    f.synchronousStandbyNames = s[4].c_str();
    f.standbys = s[5].as<int>();
    if (s[6].as<bool>(false)) f.synchronousStandbys = s[7].as<int>();
    f.clockSkewSeconds = s[8].as<double>() - (unixSeconds(before) + unixSeconds(after)) / 2;
    for (const pqxx::row& r : tx.exec(kProtocolLogins))
      f.protocolLogins.push_back({r[0].c_str(), r[1].c_str(), r[2].c_str()});
    for (const pqxx::row& r : tx.exec(kSlots)) {
      ReplicationSlotFacts slot{r[0].c_str(), r[1].as<bool>(), std::nullopt};
      if (!r[2].is_null()) slot.retainedBytes = r[2].as<double>();
      f.slots.push_back(std::move(slot));
    }
    return f;
  });
}

std::vector<DurabilityFinding> durabilityFindings(const DurabilityFacts& f) {
  using enum FindingLevel;
  std::vector<DurabilityFinding> out;
  if (f.fsync == "on") {
    out.push_back({"fsync", Ok, "fsync is on"});
  } else {
    out.push_back({"fsync", Problem,
                   "fsync is " + f.fsync +
                       ": a crash of the machine can lose or corrupt the claims this server "
                       "acknowledged; set fsync = on"});
  }
  if (f.fullPageWrites == "on") {
    out.push_back({"full_page_writes", Ok, "full_page_writes is on"});
  } else {
    out.push_back({"full_page_writes", Problem,
                   "full_page_writes is " + f.fullPageWrites +
                       ": a crash of the machine mid-write can leave pages torn and claims "
                       "lost; set full_page_writes = on"});
  }

  // Replicated: standbys stream from this primary, or it is told to wait for some.
  const bool replicated = !f.standby && (f.standbys > 0 || !f.synchronousStandbyNames.empty());
  if (auto finding = judgeSynchronousCommit(f.synchronousCommit, replicated, "the server")) {
    out.push_back(std::move(*finding));
  } else {
    out.push_back(
        {"synchronous_commit", Ok, "the server has synchronous_commit = " + f.synchronousCommit});
  }
  for (const ProtocolLoginSetting& login : f.protocolLogins) {
    const std::string who = "login " + login.login + " (set on its " + login.from + ")";
    if (auto finding = judgeSynchronousCommit(login.synchronousCommit, replicated, who)) {
      out.push_back(std::move(*finding));
    }
  }

  if (f.standby) {
    out.push_back({"synchronous_standby", Note,
                   "this server is a standby (in recovery): claims are written on the primary; "
                   "run this check there"});
  } else if (f.standbys == 0 && f.synchronousStandbyNames.empty()) {
    out.push_back({"synchronous_standby", Note,
                   "no standby streams from this primary: its disk holds the only copy of every "
                   "claim; replicate it with a synchronous standby (Patroni: synchronous_mode: "
                   "true)"});
  } else if (f.synchronousStandbyNames.empty()) {
    out.push_back({"synchronous_standby", Problem,
                   std::to_string(f.standbys) +
                       " standby(s) stream from this primary and none is synchronous: a failover "
                       "loses the claims they had not received, and those run again; set "
                       "synchronous_standby_names (Patroni: synchronous_mode: true)"});
  } else if (f.standbys == 0 || (f.synchronousStandbys && *f.synchronousStandbys == 0)) {
    out.push_back({"synchronous_standby", Problem,
                   "synchronous_standby_names is '" + f.synchronousStandbyNames +
                       "' but no standby is synchronous now: every commit waits until one "
                       "connects; bring a standby back or change the setting"});
  } else if (!f.synchronousStandbys) {
    out.push_back({"synchronous_standby", Note,
                   std::to_string(f.standbys) + " standby(s), synchronous_standby_names '" +
                       f.synchronousStandbyNames +
                       "'; whether one is synchronous now is hidden from this login: grant it "
                       "pg_monitor"});
  } else {
    out.push_back({"synchronous_standby", Ok,
                   std::to_string(f.standbys) + " standby(s), " +
                       std::to_string(*f.synchronousStandbys) + " synchronous"});
  }

  bool slotFinding = false;
  for (const ReplicationSlotFacts& slot : f.slots) {
    if (slot.active) continue;
    slotFinding = true;
    const bool big = slot.retainedBytes && *slot.retainedBytes >= kSlotProblemBytes;
    out.push_back(
        {"replication_slots", big ? Problem : Note,
         "replication slot " + slot.name + " is inactive" +
             (slot.retainedBytes ? " and holds " + megabytes(*slot.retainedBytes) + " of WAL back"
                                 : std::string()) +
             ": it keeps WAL until the disk fills; bring its standby back, or drop it "
             "(pg_drop_replication_slot) if that standby is gone for good"});
  }
  if (!slotFinding) {
    out.push_back({"replication_slots", Ok,
                   f.slots.empty() ? "no replication slots"
                                   : std::to_string(f.slots.size()) + " replication slot(s), all "
                                                                      "active"});
  }

  char skew[32];
  std::snprintf(skew, sizeof skew, "%+.2f s", f.clockSkewSeconds);
  if (std::fabs(f.clockSkewSeconds) > kClockSkewProblemSeconds) {
    out.push_back({"clock", Problem,
                   std::string("the server's clock is ") + skew +
                       " off this machine's: leases and ages are taken from the servers' clocks, "
                       "which must agree across a failover; run NTP (chrony) on every node"});
  } else {
    out.push_back(
        {"clock", Ok, std::string("the server's clock is ") + skew + " off this machine's"});
  }
  return out;
}

const std::vector<std::string>& durabilityCheckNames() {
  static const std::vector<std::string> names{
      "fsync", "full_page_writes", "synchronous_commit", "synchronous_standby", "replication_slots",
      "clock"};
  return names;
}

const char* findingLevelName(FindingLevel level) {
  switch (level) {
    case FindingLevel::Ok:
      return "ok";
    case FindingLevel::Note:
      return "note";
    case FindingLevel::Problem:
      return "PROBLEM";
  }
  return "?";
}

}  // namespace idem

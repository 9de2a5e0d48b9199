#include "idem/migrations.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <pqxx/connection>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/lock_holders.hpp"

namespace idem {
namespace {

constexpr const char* kBootstrap = R"SQL(
CREATE SCHEMA IF NOT EXISTS idem;
CREATE TABLE IF NOT EXISTS idem.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text        NOT NULL DEFAULT session_user
);
)SQL";

// Any fixed number: all idemwatch migrators take the same transaction-scoped lock. Transaction-
// scoped, not a session lock: it holds behind a transaction-mode pooler too, where the session
// is not ours to keep.
constexpr const char* kLock = "SELECT pg_advisory_xact_lock(7347261900531)";

// Every EXECUTE privilege on an idem function other than its owner's own, with the grantee's name
// (PUBLIC for grantee 0). A NULL proacl is PostgreSQL's default, which includes PUBLIC: acldefault
// spells it out. Signatures as "idem.name(type, type)", the form of expectedFunctionGrants().
constexpr const char* kFunctionGrants = R"SQL(
SELECT 'idem.' || p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')',
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
 WHERE n.nspname = 'idem' AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
)SQL";

constexpr const char* kFunctionOwners = R"SQL(
SELECT 'idem.' || p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')',
       pg_catalog.pg_get_userbyid(p.proowner)
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'idem'
)SQL";

}  // namespace

std::vector<Migration> loadMigrations(const std::filesystem::path& root) {
  std::error_code ec;
  const std::filesystem::path folder =
      std::filesystem::is_directory(root / "migrations", ec) ? root / "migrations" : root;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw MigrationError("migrations folder " + folder.string() + " does not exist");
  }
  static const std::regex pattern(R"(([0-9]{3})_[A-Za-z0-9_]+\.sql)");
  std::vector<Migration> out;
  std::set<int> seen;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!entry.is_regular_file() || !std::regex_match(name, m, pattern)) continue;
    const int version = std::stoi(m[1].str());
    if (!seen.insert(version).second) {
      throw MigrationError("two migration files share the number " + m[1].str() + " in " +
                           folder.string());
    }
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in) throw MigrationError("cannot read migration " + entry.path().string());
    std::ostringstream text;
    text << in.rdbuf();
    out.push_back({version, name, text.str()});
  }
  std::sort(out.begin(), out.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  if (out.empty()) throw MigrationError("no NNN_*.sql migrations in " + folder.string());
  return out;
}

SchemaObjects loadObjects(const std::filesystem::path& root) {
  SchemaObjects out;
  std::error_code ec;
  if (!std::filesystem::is_directory(root / "objects", ec)) return out;
  out.version = loadMigrations(root).back().version;
  for (const char* kind : {"domains", "functions", "views", "triggers"}) {
    const std::filesystem::path folder = root / "objects" / kind;
    if (!std::filesystem::is_directory(folder, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.is_regular_file() && entry.path().extension() == ".sql")
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw MigrationError("cannot read " + path.string());
      std::ostringstream text;
      text << in.rdbuf();
      out.objects.push_back({std::string(kind) + "/" + path.filename().string(), text.str()});
    }
  }
  return out;
}

Baseline loadBaseline(const std::filesystem::path& root) {
  Baseline out;
  std::error_code ec;
  const std::filesystem::path folder = root / "baseline";
  if (!std::filesystem::is_directory(folder, ec)) return out;
  static const std::regex pattern(R"(([0-9]{3})_tables\.sql)");
  std::filesystem::path newest;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!entry.is_regular_file() || !std::regex_match(name, m, pattern)) continue;
    if (newest.empty() || name > newest.filename().string()) newest = entry.path();
  }
  if (newest.empty()) return out;
  const auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw MigrationError("cannot read " + path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  };
  out.tablesName = newest.filename().string();
  out.version = std::stoi(out.tablesName.substr(0, 3));
  out.grantsName = out.tablesName.substr(0, 3) + "_grants.sql";
  out.tables = read(newest);
  out.grants = read(folder / out.grantsName);
  return out;
}

const std::vector<FunctionGrant>& expectedFunctionGrants() {
  constexpr int kNoLaterMigration = std::numeric_limits<int>::max();
  // docs/contract/schema.md, "Roles". A function not named here is executable by its owner only.
  static const std::vector<FunctionGrant> grants{
      {"idem.begin(text, text, text, text, text, text, jsonb, interval, text, text)",
       "idem_writer"},
      {"idem.complete(text, integer, jsonb, uuid)", "idem_writer"},
      {"idem.fail(text, integer, text, uuid, boolean)", "idem_writer"},
      {"idem.mark_unknown(text, integer, text, uuid)", "idem_writer"},
      {"idem.expire_leases()", "idem_writer"},
      // Until schema contract v3 any writer recorded flows; since, the claimant (with its claim
      // token) and the gateway's side (idem_ledger) each have their own form.
      {"idem.record_fund_flow(text, text, text, bigint, text, text, text)", "idem_writer",
       kContractV2Migration, kContractV3Migration},
      {"idem.record_fund_flow(text, text, text, bigint, text, text, text)", "idem_ledger",
       kContractV3Migration},
      {"idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid)", "idem_writer",
       kContractV3Migration},
      {"idem.settle(text, integer, text, text, jsonb, boolean)", "idem_operator"},
      {"idem.resolve(text, integer, text, text, jsonb)", "idem_reconciler"},
      {"idem.reconcile()", "idem_reconciler"},
      {"idem.expire_leases()", "idem_reconciler"},
      // sql/migrations/010_named_conditions.sql: the readers' shared conditions and the state
      // machine.
      {"idem.lease_expired(text, timestamp with time zone)", "idem_reader", 10},
      {"idem.lease_expired(text, timestamp with time zone)", "idem_operator", 10},
      {"idem.lease_expired(text, timestamp with time zone)", "idem_reconciler", 10},
      {"idem.is_stuck(text, timestamp with time zone)", "idem_reader", 10},
      {"idem.is_stuck(text, timestamp with time zone)", "idem_operator", 10},
      {"idem.is_stuck(text, timestamp with time zone)", "idem_reconciler", 10},
      {"idem.transition_allowed(text, text, text)", "idem_reader", 10},
      {"idem.transition_allowed(text, text, text)", "idem_operator", 10},
      {"idem.transition_allowed(text, text, text)", "idem_reconciler", 10},
      // sql/migrations/012_money_questions.sql: the money questions, for the exporter and the admin
      // app (the stories' two helpers too: the stories run as their caller).
      {"idem.money_moved_without_success(text[], interval, interval)", "idem_reader", 12},
      {"idem.money_moved_without_success(text[], interval, interval)", "idem_operator", 12},
      {"idem.success_without_money_moved(text[], interval, interval)", "idem_reader", 12},
      {"idem.success_without_money_moved(text[], interval, interval)", "idem_operator", 12},
      {"idem.overcharged_objects(text[], interval)", "idem_reader", 12},
      {"idem.overcharged_objects(text[], interval)", "idem_operator", 12},
      {"idem.trace_story(text, text, integer)", "idem_reader", 12},
      {"idem.trace_story(text, text, integer)", "idem_operator", 12},
      {"idem.business_object_story(text, text, integer)", "idem_reader", 12},
      {"idem.business_object_story(text, text, integer)", "idem_operator", 12},
      {"idem.story_events(bigint[], text[], text[], text[], integer)", "idem_reader", 12},
      {"idem.story_events(bigint[], text[], text[], text[], integer)", "idem_operator", 12},
      {"idem.story_limit_checked(text, integer)", "idem_reader", 12},
      {"idem.story_limit_checked(text, integer)", "idem_operator", 12},
      // Schema contract v3: what each business type's side effect is, for every reader.
      {"idem.business_type(text)", "idem_reader", kContractV3Migration},
      {"idem.business_type(text)", "idem_operator", kContractV3Migration},
      {"idem.business_type(text)", "idem_reconciler", kContractV3Migration},
      {"idem.side_effect_recorded(text, text, text)", "idem_reader", kContractV3Migration},
      {"idem.side_effect_recorded(text, text, text)", "idem_operator", kContractV3Migration},
      {"idem.side_effect_recorded(text, text, text)", "idem_reconciler", kContractV3Migration},
      {"idem.side_effect_of(text)", "idem_reader", kContractV3Migration},
      {"idem.side_effect_of(text)", "idem_operator", kContractV3Migration},
      {"idem.side_effect_of(text)", "idem_reconciler", kContractV3Migration},
      {"idem.side_effect_role(text, text)", "idem_reader", kContractV3Migration,
       std::numeric_limits<int>::max(), true},
      {"idem.side_effect_role(text, text)", "idem_operator", kContractV3Migration,
       std::numeric_limits<int>::max(), true},
      {"idem.side_effect_role(text, text)", "idem_reconciler", kContractV3Migration,
       std::numeric_limits<int>::max(), true},
      {"idem.minor_total(numeric)", "idem_reader", kContractV3Migration},
      {"idem.minor_total(numeric)", "idem_operator", kContractV3Migration},
      // The amount a request asks for, as the console's proposals compare it with a line.
      {"idem.request_amount_minor(jsonb)", "idem_operator", kGatewayEvidenceMigration,
       kNoLaterMigration, true},
      // The gateway's evidence: its statements, callbacks and status answers are its word
      // (idem_ledger); the reconciler's pass decides from what they stored. Objects only: no
      // numbered migration creates them.
      {"idem.open_statement(text, text, text, text)", "idem_ledger", kGatewayEvidenceMigration,
       kNoLaterMigration, true},
      {"idem.add_statement_lines(bigint, jsonb)", "idem_ledger", kGatewayEvidenceMigration,
       kNoLaterMigration, true},
      {"idem.close_statement(bigint, bigint, timestamp with time zone, timestamp with time zone, "
       "boolean)",
       "idem_ledger", kGatewayEvidenceMigration, kNoLaterMigration, true},
      {"idem.ingest_callback(text, text, text, bigint, text, text, text, text, jsonb)",
       "idem_ledger", kGatewayEvidenceMigration, kNoLaterMigration, true},
      {"idem.record_lookup_answer(text, text, text, boolean, text, bigint, text, text, jsonb)",
       "idem_ledger", kGatewayEvidenceMigration, kNoLaterMigration, true},
      {"idem.resolve_from_gateway_evidence()", "idem_reconciler", kGatewayEvidenceMigration,
       kNoLaterMigration, true},
      {"idem.resolve_from_gateway_evidence()", "idem_ledger", kGatewayEvidenceMigration,
       kNoLaterMigration, true},
  };
  return grants;
}

std::vector<std::string> functionGrantDifferences(pqxx::transaction_base& tx) {
  return translatingErrors("compare the function grants", [&] {
    const int version =
        tx.exec1("SELECT coalesce(max(version), 0) FROM idem.schema_migrations")[0].as<int>();
    std::vector<std::string> out;
    std::set<std::string> functions;
    for (const auto& row : tx.exec(kFunctionOwners)) {
      functions.insert(row[0].c_str());
      if (std::string(row[1].c_str()) != "idem_owner") {
        out.push_back(std::string(row[0].c_str()) + " is owned by " + row[1].c_str() +
                      ", not by idem_owner");
      }
    }
    std::set<std::pair<std::string, std::string>> expected;
    for (const FunctionGrant& g : expectedFunctionGrants()) {
      // A function only sql/objects/ defines is due once its file was applied, which a database
      // built from the numbered files alone never was: then its grants are checked like any.
      if (g.objectOnly && !functions.contains(g.function)) continue;
      if (g.since <= version && version < g.until) expected.insert({g.function, g.grantee});
    }
    std::set<std::pair<std::string, std::string>> actual;
    for (const auto& row : tx.exec(kFunctionGrants))
      actual.insert({row[0].c_str(), row[1].c_str()});

    for (const auto& [function, grantee] : actual) {
      if (!expected.contains({function, grantee})) {
        out.push_back(function + " is executable by " + grantee +
                      ", which the contract's role table does not allow");
      }
    }
    for (const auto& [function, grantee] : expected) {
      if (!functions.contains(function)) {
        out.push_back(function +
                      " is in the contract's role table but the database has no such "
                      "function");
      } else if (!actual.contains({function, grantee})) {
        out.push_back(function + " is not executable by " + grantee +
                      ", which the contract's role table requires");
      }
    }
    return out;
  });
}

namespace {

// Texts of a migration that were released and later replaced, each by a text that ends in the
// same schema: a database that applied one is not refused. Two kinds:
// - comments reworded, the statements untouched (001, 005-008, 010, 012, 013);
// - 008's second released text, which also put begin's in-statement tombstone check under
//   retention's lock and gave purge its exclusive hold; 011 (CREATE OR REPLACE of idem.begin and
//   idem.purge, the only functions the two texts differ in) brings either to the same functions.
// Any other text of an applied migration is refused.
struct EarlierText {
  int version;
  std::string_view checksum;
};
constexpr EarlierText kEarlierTexts[] = {
    {1, "e12303dcb4454fb2669117d83f70a2ae82a1546244612e73f5b6e46cf0eb7731"},
    {5, "dc894d985ac05403ac1215aeb87adcbeded74ce085df5c1c9b2160d7df48cb85"},
    {6, "74d84a12a22fedd1f6696bc06e594bfb12529c9ee0ab7aa7b68c2b609660726b"},
    {7, "6f634bcf031360c97414343c7289314a5b78fd23bf6c77f6b98a7c63aa0d3fe7"},
    {8, "bb36a77114bbbb7e4d636f3673d46afb2e268866c10f1c443f13eae795cdcb09"},
    {8, "c7ea87ed222a9e991b32ce76f31c03aea64e805ed78218189f588a1490e9fa00"},
    {10, "2b7988ffb30abc5695a3a186954d5afb6f08cf61ec3962adb9ae027a88f9b6e1"},
    {12, "b758e4b89bbfe014f6022ab48c270d57c684de584e669e96cd6dc3228a82377c"},
    {13, "249fa4b955e461c13e7dd7d85c25df39d54884364c3d6efa1dfb20c6ffe7f7ca"},
};

bool isEarlierText(int version, std::string_view checksum) {
  for (const EarlierText& e : kEarlierTexts) {
    if (e.version == version && e.checksum == checksum) return true;
  }
  return false;
}

}  // namespace

namespace {

MigrationReport migrateOnce(pqxx::connection& connection, const std::vector<Migration>& migrations,
                            const MigrateOptions& options);

// The text each object was last applied with. Owned like schema_migrations: by idem_owner, read by
// no other role.
constexpr const char* kObjectsTable = R"SQL(
CREATE TABLE IF NOT EXISTS idem.schema_objects (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text        NOT NULL DEFAULT session_user
);
DO $$
BEGIN
    IF (SELECT relowner::regrole::text FROM pg_catalog.pg_class
         WHERE oid = 'idem.schema_objects'::regclass) <> 'idem_owner' THEN
        ALTER TABLE idem.schema_objects OWNER TO idem_owner;
    END IF;
END $$;
)SQL";

// An empty database takes the baseline when it stands for exactly the migrations given (the
// newest is its version) and the objects are written for that version.
bool useBaseline(const std::vector<Migration>& migrations, const MigrateOptions& options) {
  if (!options.baseline || options.baseline->version == 0 || !options.objects) return false;
  if (migrations.empty() || migrations.back().version != options.baseline->version) return false;
  if (options.objects->version != options.baseline->version) return false;
  return !options.upTo || *options.upTo >= options.baseline->version;
}

// Applies every object whose text is not the one recorded, in the set's order, and records it.
// Bodies are not checked at creation (a function may name a view applied after it); each is
// checked when it first runs, and the suites run them all.
void applyObjects(pqxx::transaction_base& tx, const SchemaObjects& set, MigrationReport& report) {
  tx.exec(kObjectsTable);
  tx.exec("SET LOCAL check_function_bodies = off");
  std::map<std::string, std::string> recorded;
  for (const auto& row : tx.exec("SELECT name, checksum FROM idem.schema_objects"))
    recorded[row[0].c_str()] = row[1].c_str();
  std::set<std::string> names;
  for (const SchemaObject& o : set.objects) {
    names.insert(o.name);
    const std::string checksum =
        tx.exec_params1("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", o.sql)[0].c_str();
    if (const auto it = recorded.find(o.name); it != recorded.end() && it->second == checksum) {
      ++report.objectsUnchanged;
      continue;
    }
    try {
      tx.exec(o.sql);
    } catch (const pqxx::sql_error& e) {
      throw DatabaseError(
          e.sqlstate(), "migrate: sql/objects/" + o.name + " failed: " + primaryMessage(e.what()));
    }
    tx.exec_params(
        "INSERT INTO idem.schema_objects (name, checksum) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now(), "
        "applied_by = session_user",
        o.name, checksum);
    report.reapplied.push_back(o.name);
  }
  // An object no longer in the tree was dropped by the migration that removed it.
  for (const auto& [name, checksum] : recorded) {
    if (!names.contains(name))
      tx.exec_params("DELETE FROM idem.schema_objects WHERE name = $1", name);
  }
}

// A function or view an object file created is the migrating role's: it goes to idem_owner, a
// function executable by nobody but its owner, then by exactly the roles the contract's table
// names (expectedFunctionGrants). What existed before keeps its owner and grants (CREATE OR
// REPLACE does not touch them).
constexpr const char* kStrangers = R"SQL(
SELECT 'FUNCTION', p.oid::regprocedure::text,
       'idem.' || p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')'
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace AND p.proowner <> 'idem_owner'::regrole
UNION ALL
SELECT 'VIEW', c.oid::regclass::text, NULL
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'idem'::regnamespace AND c.relkind = 'v'
   AND c.relowner <> 'idem_owner'::regrole
)SQL";

void adoptNewObjects(pqxx::transaction_base& tx) {
  const int version =
      tx.exec1("SELECT coalesce(max(version), 0) FROM idem.schema_migrations")[0].as<int>();
  for (const auto& row : tx.exec(kStrangers)) {
    const std::string kind = row[0].c_str();
    const std::string name = row[1].c_str();
    tx.exec("ALTER " + kind + " " + name + " OWNER TO idem_owner");
    if (kind != "FUNCTION") continue;
    tx.exec("REVOKE ALL ON FUNCTION " + name + " FROM PUBLIC");
    for (const FunctionGrant& g : expectedFunctionGrants()) {
      if (g.function == row[2].c_str() && g.since <= version && version < g.until)
        tx.exec("GRANT EXECUTE ON FUNCTION " + name + " TO " + tx.quote_name(g.grantee));
    }
  }
}

}  // namespace

MigrationReport migrate(pqxx::connection& connection, const std::vector<Migration>& migrations,
                        const MigrateOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.lockWait;
  auto pause = std::chrono::milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    try {
      return migrateOnce(connection, migrations, options);
    } catch (const DatabaseError& e) {
      if (e.sqlstate() != "55P03") throw;  // lock_not_available: lock_timeout ran out
      const std::string holders = describeLockHolders(connection);
      const auto now = std::chrono::steady_clock::now();
      if (now + pause >= deadline) {
        throw MigrationError(
            "migrate: gave up after " + std::to_string(attempt) +
            " attempts: a lock the migration needs stayed held by " + holders +
            "; nothing was applied. End that transaction (or wait for it) and migrate again");
      }
      if (options.onWait) {
        options.onWait("migrate: attempt " + std::to_string(attempt) + " waited " +
                       std::to_string(options.lockTimeout.count()) + " ms for a lock held by " +
                       holders + "; nothing applied, trying again in " +
                       std::to_string(pause.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(10'000));
    }
  }
}

namespace {

MigrationReport migrateOnce(pqxx::connection& connection, const std::vector<Migration>& migrations,
                            const MigrateOptions& options) {
  return translatingErrors("migrate", [&] {
    MigrationReport report;
    Work tx(connection);
    // For this transaction alone: every lock it asks for (the advisory one, each ALTER's) is
    // given up after lockTimeout, so the writers queued behind its request wait no longer.
    tx.exec("SET LOCAL lock_timeout = " + std::to_string(options.lockTimeout.count()));
    tx.exec(kLock);
    tx.exec(kBootstrap);

    struct Applied {
      std::string name;
      std::string checksum;
    };
    std::map<int, Applied> applied;
    for (const auto& row : tx.exec("SELECT version, name, checksum FROM idem.schema_migrations")) {
      applied[row[0].as<int>()] = {row[1].c_str(), row[2].c_str()};
    }

    if (applied.empty() && useBaseline(migrations, options)) {
      const Baseline& b = *options.baseline;
      try {
        tx.exec(b.tables);
      } catch (const pqxx::sql_error& e) {
        throw DatabaseError(e.sqlstate(), "migrate: sql/baseline/" + b.tablesName +
                                              " failed: " + primaryMessage(e.what()));
      }
      for (const Migration& m : migrations) {
        tx.exec_params(
            "INSERT INTO idem.schema_migrations (version, name, checksum) "
            "VALUES ($1, $2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))",
            m.version, m.name, m.sql);
        report.applied.push_back(m.name);
        applied[m.version] = {m.name, ""};
      }
      applyObjects(tx, *options.objects, report);
      try {
        tx.exec(b.grants);
      } catch (const pqxx::sql_error& e) {
        throw DatabaseError(e.sqlstate(), "migrate: sql/baseline/" + b.grantsName +
                                              " failed: " + primaryMessage(e.what()));
      }
      adoptNewObjects(tx);  // objects newer than the baseline's grants
      report.baseline = b.tablesName;
    }

    std::set<int> known;
    for (const Migration& m : migrations) {
      known.insert(m.version);
      if (options.upTo && m.version > *options.upTo) continue;
      const std::string checksum =
          tx.exec_params1("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", m.sql)[0].c_str();
      if (auto it = applied.find(m.version); it != applied.end()) {
        if (!report.baseline.empty()) continue;  // recorded by the baseline this run
        if (it->second.checksum != checksum && !isEarlierText(m.version, it->second.checksum)) {
          throw MigrationError("migration " + m.name + " was applied with checksum " +
                               it->second.checksum.substr(0, 12) + "… but the file now has " +
                               checksum.substr(0, 12) +
                               "…: applied migrations must never change; add a new numbered "
                               "migration instead");
        }
        ++report.alreadyApplied;
        continue;
      }
      try {
        tx.exec(m.sql);
      } catch (const pqxx::sql_error& e) {
        throw DatabaseError(e.sqlstate(),
                            "migrate: " + m.name + " failed: " + primaryMessage(e.what()));
      }
      tx.exec_params(
          "INSERT INTO idem.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
          m.version, m.name, checksum);
      report.applied.push_back(m.name);
    }
    for (const auto& [version, entry] : applied) {
      if (!known.contains(version)) {
        throw MigrationError("the database has migration " + entry.name +
                             ", which this program does not know: it is older than the schema; "
                             "use a newer idemctl");
      }
    }
    if (options.objects && !options.objects->objects.empty() && report.baseline.empty()) {
      const int version =
          tx.exec1("SELECT coalesce(max(version), 0) FROM idem.schema_migrations")[0].as<int>();
      if (version >= options.objects->version) {
        applyObjects(tx, *options.objects, report);
        adoptNewObjects(tx);
      }
    }
    // The history's day partitions, a week ahead, once the function that makes them is there.
    if (!tx.exec1("SELECT to_regprocedure('idem.prepare_history_partitions(integer)')")[0]
             .is_null())
      tx.exec("SELECT idem.prepare_history_partitions()");
    // The grants are checked on every run, not only after this one's changes: a grant made by
    // hand since (GRANT EXECUTE ... TO PUBLIC) is a hole too, and it is refused loudly here.
    const bool atVersion2 =
        tx.exec1("SELECT coalesce(max(version), 0) FROM idem.schema_migrations")[0].as<int>() >=
        kContractV2Migration;
    if (atVersion2) {
      const std::vector<std::string> differences = functionGrantDifferences(tx);
      if (!differences.empty()) {
        std::string message =
            "migrate: the idem functions' EXECUTE grants differ from the "
            "contract (docs/contract/schema.md, Roles), nothing was applied: ";
        for (std::size_t i = 0; i < differences.size(); ++i) {
          message += (i == 0 ? "" : "; ") + differences[i];
        }
        throw MigrationError(message);
      }
    }
    tx.commit();
    return report;
  });
}

}  // namespace

}  // namespace idem

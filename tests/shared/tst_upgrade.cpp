// Upgrade in place: a database built and used under schema version 1 (migrations up to 005, written
// through the version-1 functions as a v1 agent runtime called them) migrates to version 2 with its
// data: every record, attempt, transition and fund flow exactly as it was, the identity counters
// going on from where they were, the version-1 signatures gone, and the v1 records behaving by the
// v2 rules afterwards.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

constexpr int kVersion1 = 5;  // 001..005: schema contract version 1

// A version-1 begin, as raw SQL (it returned four columns and no token).
std::string v1Begin(const std::string& key, const std::string& bizId,
                    const std::string& source = "initial", const std::string& lease = "30 seconds",
                    const std::string& bizType = "payment", const std::string& tool = "pay") {
  return "SELECT outcome FROM idem.begin('" + key + "', '" + bizType + "', '" + bizId + "', '" +
         tool + "', NULL, '" + source + "', '{\"amount\": 2990}', interval '" + lease + "')";
}

BeginRequest request(const std::string& key, const std::string& bizId) {
  BeginRequest r = test::payRequest(key, bizId);
  r.requestPayload = R"({"amount": 2990})";
  r.source = TriggerSource::Llm;
  return r;
}

}  // namespace

class TestUpgrade : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;

  std::string text(const std::string& sql) {
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const auto r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string("<null>") : std::string(r[0][0].c_str());
  }
  long long count(const std::string& sql) { return db_->scalar(sql); }

  // Everything version 1 had, as text, in a stable order: the upgrade must leave it identical.
  std::string version1Contents() {
    return text(
        "SELECT concat_ws(E'\\n',"
        " (SELECT string_agg(concat_ws('|', idempotency_key, biz_type, biz_id, tool, request_hash, "
        "status, version,"
        "   lease_expires_at, request_payload, response_payload, last_error, attempt_count, "
        "created_at, updated_at), E'\\n'"
        "   ORDER BY idempotency_key) FROM idem.records),"
        " (SELECT string_agg(concat_ws('|', id, idempotency_key, biz_type, biz_id, tool, "
        "trigger_source, outcome,"
        "   request_hash, agent_id, trace_id, created_at), E'\\n' ORDER BY id) FROM idem.attempts),"
        " (SELECT string_agg(concat_ws('|', id, idempotency_key, from_status, to_status, version, "
        "actor, actor_kind,"
        "   reason, evidence, created_at), E'\\n' ORDER BY id) FROM idem.transitions),"
        " (SELECT string_agg(concat_ws('|', id, biz_type, biz_id, kind, amount_minor, currency, "
        "external_ref,"
        "   idempotency_key, duplicate_of, created_at), E'\\n' ORDER BY id) FROM "
        "idem.fund_flows))");
  }

 private slots:
  void init() {
    db_ = std::make_unique<test::TestDatabase>("tst_upgrade", false);
    auto c = db_->connect();
    QCOMPARE(migrate(*c, bundledMigrations(), MigrateOptions{.upTo = kVersion1}).applied.size(),
             std::size_t(kVersion1));
    // Traffic as version 1 saw it, through its own functions.
    db_->exec(
        v1Begin("a", "oa") + "; SELECT idem.complete('a', 1, '{\"ref\": \"gw-a\"}');" +
        v1Begin("a", "oa", "llm") + ";" + v1Begin("b", "ob") +
        "; SELECT idem.fail('b', 1, 'connection refused');" + v1Begin("c", "oc") +
        "; SELECT idem.mark_unknown('c', 1, 'timeout'); SELECT idem.fail('c', 2, NULL);" +
        v1Begin("d", "od") + "; SELECT idem.mark_unknown('d', 1, 'timeout');" +
        "SELECT idem.record_fund_flow('payment', 'od', 'DEBIT', 2990, 'CNY', 'gw-d', 'd');" +
        v1Begin("e", "oe", "initial", "1 hour") + ";" + v1Begin("e", "oe", "http", "1 hour") + ";" +
        v1Begin("f", "of") + "; SELECT idem.settle('f', 1, 'FAILED', 'operator: no charge');" +
        v1Begin("g", "og") + "; SELECT idem.complete('g', 1, '{}');" + v1Begin("g2", "og") + ";" +
        "SELECT idem.record_fund_flow('payment', 'og', 'DEBIT', 2990, 'CNY', 'gw-g', 'g');" +
        "SELECT idem.record_fund_flow('payment', 'og', 'DEBIT', 2990, 'CNY', 'gw-g-2', 'g');" +
        // Rows version 2 would refuse at the door: they must not stop the upgrade.
        v1Begin("legacy", "ol", "initial", "30 seconds", "legacy type with spaces",
                std::string(200, 't')) +
        "; SELECT idem.complete('legacy', 1, '{}');");
  }
  void cleanup() { db_.reset(); }

  void version1DatabaseMigratesInPlaceWithItsData() {
    const std::string before = version1Contents();
    const long long maxAttempt = count("SELECT max(id) FROM idem.attempts");
    const long long maxTransition = count("SELECT max(id) FROM idem.transitions");
    QCOMPARE(count("SELECT count(*) FROM idem.records"), 8LL);  // g2 was rejected

    auto c = db_->connect();
    const MigrationReport report = migrate(*c, bundledMigrations());
    QCOMPARE(report.alreadyApplied, kVersion1);
    QCOMPARE(report.applied.size(), bundledMigrations().size() - kVersion1);

    QCOMPARE(version1Contents(), before);
    // The version-1 signatures are gone; one of each remains.
    QCOMPARE(count("SELECT count(*) FROM pg_proc WHERE pronamespace = 'idem'::regnamespace AND "
                   "proname IN ('begin', 'complete', 'fail', 'mark_unknown', 'settle', 'purge')"),
             6LL);
    QCOMPARE(count("SELECT count(*) FROM pg_proc WHERE oid::regprocedure::text = "
                   "'idem.complete(text,integer,jsonb)'"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM pg_proc WHERE pronamespace = 'idem'::regnamespace AND "
                   "proname = 'records_created'"),
             0LL);
    // A FAILED record stays re-claimable as version 1 made it, except the UNKNOWN one `fail`
    // declared FAILED (an uncertain outcome): that stays final. Records in flight carry no token.
    QCOMPARE(text("SELECT string_agg(idempotency_key || ':' || retry_allowed, ' ' ORDER BY "
                  "idempotency_key) FROM idem.records WHERE status = 'FAILED'"),
             std::string("b:true c:false f:true"));
    QCOMPARE(count("SELECT count(*) FROM idem.records WHERE claim_token_hash IS NOT NULL"), 0LL);

    // The counters go on: new rows continue the identities, nothing is re-numbered.
    ProtocolClient p(*c);
    const BeginResult b = p.begin(request("b", "ob"));
    QCOMPARE(b.outcome, Outcome::Executed);
    QVERIFY(b.claimToken);
    QVERIFY(count("SELECT min(id) FROM idem.attempts WHERE id > " + std::to_string(maxAttempt)) ==
            maxAttempt + 1);
    QVERIFY(count("SELECT min(id) FROM idem.transitions WHERE id > " +
                  std::to_string(maxTransition)) == maxTransition + 1);
    QVERIFY(p.complete("b", 3, "{}", *b.claimToken).ok());
  }

  void version1RecordsFollowTheVersion2RulesAfterwards() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    ProtocolClient p(*c);
    // SUCCESS replays; its object stays paid under a new key.
    QCOMPARE(p.begin(request("a", "oa")).outcome, Outcome::Replayed);
    QCOMPARE(p.begin(request("a-new", "oa")).outcome, Outcome::Rejected);
    // The v1 UNKNOWN -> FAILED stays final: replayed, never run again.
    const BeginResult cr = p.begin(request("c", "oc"));
    QCOMPARE(cr.outcome, Outcome::Replayed);
    QCOMPARE(cr.status, std::optional(RecordStatus::Failed));
    // The v1 UNKNOWN with a DEBIT under its key is reconciled.
    QCOMPARE(p.reconcile(), 1);
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key = 'd'"),
             std::string("SUCCESS"));
    // A v1 claimant in flight has no token: nobody can answer for it but the sweep, the reconciler
    // or a person, and a person only after its lease.
    const ChangeResult stranger = p.complete("e", 1, "{}", "00000000-0000-4000-8000-000000000000");
    QCOMPARE(stranger.result, ResultCode::NotClaimant);
    QCOMPARE(p.settle("e", 1, RecordStatus::Failed, "looks stuck", std::nullopt).result,
             ResultCode::LeaseActive);
    // The operator's v1 FAILED may run again, once.
    QCOMPARE(p.begin(request("f", "of")).outcome, Outcome::Executed);
    QCOMPARE(p.begin(request("f", "of")).outcome, Outcome::InProgress);
    // The legacy row that breaks the v2 bounds is still there and readable; new calls with such a
    // biz_type are refused at the door.
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key = 'legacy'"),
             std::string("SUCCESS"));
    // History written after the upgrade names the new actor kinds.
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'd' AND "
                   "actor_kind = 'reconciler'"),
             1LL);
  }

  // The history as it was becomes one partition, attached in place: every row where it was, with
  // its id. Once its end is older than the retention age it goes whole, like a day, keeping the
  // rows of the records still open.
  void theOldHistoryIsOnePartitionThatRetentionDropsWhole() {
    const long long attempts = count("SELECT count(*) FROM idem.attempts");
    const long long transitions = count("SELECT count(*) FROM idem.transitions");
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE tableoid = "
                   "'idem.attempts_before_days'::regclass"),
             attempts);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE tableoid = "
                   "'idem.transitions_before_days'::regclass"),
             transitions);
    // Day partitions start where it ends.
    QVERIFY(count("SELECT count(*) FROM pg_class WHERE relname ~ '^attempts_p' AND "
                  "idem.history_partition_end(relname) <= "
                  "idem.history_partition_end('attempts_before_days')") == 0);
    QVERIFY(count("SELECT count(*) FROM pg_class WHERE relname ~ '^attempts_p'") >= 7);

    // Forty days on (everything moved back, the partition's end with it).
    for (const std::string t : {"records", "attempts", "transitions"}) {
      const std::string trigger = t == "records" ? "records_guard" : t + "_append_only";
      const std::string updated =
          t == "records" ? ", updated_at = updated_at - interval '40 days'" : "";
      db_->exec("ALTER TABLE idem." + t + " DISABLE TRIGGER " + trigger + "; UPDATE idem." + t +
                " SET created_at = created_at - interval '40 days'" + updated +
                "; ALTER TABLE idem." + t + " ENABLE TRIGGER " + trigger);
    }
    db_->exec(
        "DO $$ DECLARE t text; BEGIN FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP "
        "EXECUTE format('ALTER TABLE idem.%I DETACH PARTITION idem.%I', t, t || '_before_days'); "
        "EXECUTE format('ALTER TABLE idem.%I ATTACH PARTITION idem.%I FOR VALUES FROM (MINVALUE) "
        "TO (%L)', t, t || '_before_days', now() - interval '35 days'); END LOOP; END $$");
    const auto ids = [&](const std::string& t) {
      return text("SELECT string_agg(id::text, ' ' ORDER BY id) FROM idem." + t +
                  " WHERE idempotency_key IN ('d', 'e')");
    };
    const std::string openAttempts = ids("attempts"), openTransitions = ids("transitions");

    db_->exec("SELECT * FROM idem.purge('30 days')");
    QCOMPARE(text("SELECT coalesce(to_regclass('idem.attempts_before_days')::text, 'gone') || ' ' "
                  "|| coalesce(to_regclass('idem.transitions_before_days')::text, 'gone')"),
             std::string("gone gone"));
    // The UNKNOWN and the PROCESSING record stay, and all of their history with its ids.
    QCOMPARE(text("SELECT string_agg(idempotency_key, ' ' ORDER BY idempotency_key) FROM "
                  "idem.records"),
             std::string("d e"));
    QCOMPARE(ids("attempts"), openAttempts);
    QCOMPARE(ids("transitions"), openTransitions);
    QCOMPARE(count("SELECT count(*) FROM idem.attempts WHERE idempotency_key NOT IN ('d', 'e')"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.transitions WHERE idempotency_key NOT IN ('d', 'e')"),
             0LL);
    QCOMPARE(count("SELECT count(*) FROM idem.retired_keys"), 6LL);
  }

  // The migration runs as one transaction: a failure in it leaves the version-1 database as it was.
  void failedUpgradeLeavesVersion1AsItWas() {
    const std::string before = version1Contents();
    std::vector<Migration> migrations = bundledMigrations();
    migrations.push_back({998, "998_broken.sql", "SELECT no_such_function();"});
    auto c = db_->connect();
    QVERIFY_THROWS_EXCEPTION(std::exception, migrate(*c, migrations));
    QCOMPARE(count("SELECT max(version) FROM idem.schema_migrations"), (long long)kVersion1);
    QCOMPARE(version1Contents(), before);
    QCOMPARE(count("SELECT count(*) FROM pg_proc WHERE oid::regprocedure::text = "
                   "'idem.complete(text,integer,jsonb)'"),
             1LL);
  }
};

QTEST_GUILESS_MAIN(TestUpgrade)
#include "tst_upgrade.moc"

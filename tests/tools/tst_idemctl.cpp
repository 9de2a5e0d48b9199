// idemctl as a user meets it (schema contract v3): exit codes, one-line errors, migrate upgrading a
// version-1 database with its data, the settle runbook path with each refusal of the server (its
// own exit code; lease_active with the lease's end, money_moved with the flows), the override that
// needs a reason and is recorded, reconcile once and as a loop stopped by SIGTERM, and purge's
// tombstones.
#include <QProcess>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <sstream>

#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "idemctl.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

class TestIdemctl : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::atomic<bool> stop_{false};
  std::string out_, err_;
  std::string operator_, reconciler_, writer_, ledger_;

  // The newest migration this idemctl carries, as `migrate` names it.
  static std::string latest() { return std::to_string(bundledMigrations().back().version); }

  int idemctl(std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = ctl::run(args, {out, err, false}, stop_);
    out_ = out.str();
    err_ = err.str();
    return code;
  }
  bool errSays(const std::string& text) const { return err_.find(text) != std::string::npos; }
  bool outSays(const std::string& text) const { return out_.find(text) != std::string::npos; }
  std::string as(const std::string& role) const { return db_->dsnAs(role); }
  std::string text(const std::string& sql) const {
    pqxx::connection c(db_->dsn());
    pqxx::nontransaction tx(c);
    const pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].c_str();
  }

  // A payment whose gateway response was lost: UNKNOWN at version 2; with `charged`, the gateway's
  // DEBIT (naming the key) is in the ledger.
  void lostResponse(const std::string& key, const std::string& order, bool charged) {
    pqxx::connection c(as(writer_));
    ProtocolClient client(c);
    const BeginResult begun = client.begin(test::payRequest(key, order));
    QCOMPARE(begun.outcome, Outcome::Executed);
    if (charged) {
      client.recordFundFlow(
          {"payment", order, FundFlowKind::Debit, 2990, "CNY", "gw-" + order, key},
          *begun.claimToken);
    }
    QVERIFY(client.markUnknown(key, 1, "gateway timeout after 5s", *begun.claimToken).ok());
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_idemctl", false); }

  void usageErrorsExitTwoWithOneLine() {
    QCOMPARE(idemctl({}), 2);
    QCOMPARE(idemctl({"frobnicate"}), 2);
    QVERIFY(errSays("unknown command 'frobnicate'"));
    QCOMPARE(idemctl({"simulate", "--agents=0"}), 2);
    QCOMPARE(err_, std::string("idemctl simulate: --agents must be between 1 and 256, got 0\n"));
    QCOMPARE(idemctl({"simulate", "--response-loss-rate=2"}), 2);
    QCOMPARE(idemctl({"simulate", "--careless-rate=1.5"}), 2);
    QCOMPARE(idemctl({"simulate", "--duration=forever"}), 2);
    QVERIFY(errSays("--duration must be a duration"));
    QCOMPARE(idemctl({"settle", "k1", "--to", "DONE", "--reason", "x"}), 2);
    QVERIFY(errSays("--to must be SUCCESS or FAILED, got 'DONE'"));
    QCOMPARE(idemctl({"settle", "k1", "--to", "FAILED"}), 2);
    QVERIFY(errSays("--reason is required"));
    // The override needs a reason like any settle.
    QCOMPARE(idemctl({"settle", "k1", "--to", "FAILED", "--override-money-moved"}), 2);
    QVERIFY(errSays("--reason is required"));
    QCOMPARE(idemctl({"settle", "--to", "FAILED", "--reason", "x"}), 2);
    QCOMPARE(idemctl({"purge"}), 2);
    QCOMPARE(idemctl({"reconcile", "--every", "0s"}), 2);
    QVERIFY(errSays("--every must be positive"));
    QCOMPARE(idemctl({"reconcile", "extra"}), 2);
    QCOMPARE(idemctl({"migrate", "--no-such-flag"}), 2);
    QCOMPARE(std::count(err_.begin(), err_.end(), '\n'), 1L);
  }

  // The same mistake is worded the same in every subcommand (and in the exporter).
  void flagMistakesAreWordedOnce() {
    QCOMPARE(idemctl({"simulate", "--agents=2", "--agents=3"}), 2);
    QCOMPARE(err_, std::string("idemctl simulate: --agents is given twice\n"));
    QCOMPARE(idemctl({"migrate", "--no-such-flag"}), 2);
    QCOMPARE(err_, std::string("idemctl migrate: unknown flag --no-such-flag (see --help)\n"));
    QCOMPARE(idemctl({"reconcile", "--every"}), 2);
    QCOMPARE(err_, std::string("idemctl reconcile: --every needs a value (DURATION)\n"));
    QCOMPARE(
        idemctl({"settle", "k1", "--to", "FAILED", "--reason", "x", "--override-money-moved=yes"}),
        2);
    QCOMPARE(err_, std::string("idemctl settle: --override-money-moved takes no value\n"));
    QCOMPARE(idemctl({"purge", "--older-than", "soon"}), 2);
    QCOMPARE(err_, std::string("idemctl purge: --older-than must be a duration such as 500ms, 5s, "
                               "1m or 24h, got 'soon'\n"));
    QCOMPARE(idemctl({"purge", "--older-than", "30d", "--batch", "-1"}), 2);
    QVERIFY2(errSays("--batch"), err_.c_str());
    QCOMPARE(idemctl({"simulate", "--biz-types=payment,,refund"}), 2);
    QVERIFY2(errSays("--biz-types must be a list without an empty item"), err_.c_str());
    QCOMPARE(idemctl({"expire-leases", "extra"}), 2);
    QCOMPARE(err_, std::string("idemctl expire-leases: unexpected argument 'extra'\n"));
  }

  void helpShowsEachFlagWithItsDefault() {
    QCOMPARE(idemctl({"simulate", "-h"}), 0);
    for (const char* line :
         {"--agents=N", "(default 4)", "--lease=DURATION", "(default 15s)", "--biz-types=LIST",
          "(default payment,refund,coupon)", "--quiet", "-h, --help"}) {
      QVERIFY2(outSays(line), line);
    }
    QCOMPARE(idemctl({"migrate", "--version"}), 0);
    QVERIFY2(outSays(std::string("idemctl migrate ") + IDEMWATCH_VERSION), out_.c_str());
  }

  void helpDocumentsTheExitCodesAndFlags() {
    QCOMPARE(idemctl({"settle", "--help"}), 0);
    for (const char* line :
         {"--override-side-effect", "3  refused, conflict", "4  refused, side_effect_recorded",
          "5  refused, lease_active", "6  refused, invalid_transition", "7  refused, not_found",
          "deprecated"}) {
      QVERIFY2(outSays(line), line);
    }
    QCOMPARE(idemctl({"reconcile", "--help"}), 0);
    QVERIFY(outSays("--every") && outSays("idem_reconciler"));
    QCOMPARE(idemctl({"simulate", "--help"}), 0);
    for (const char* flag : {"--careless-rate", "--settle-every", "--reconcile-every",
                             "--refused-rate", "--operator-dsn", "--reconciler-dsn"}) {
      QVERIFY2(outSays(flag), flag);
    }
    QCOMPARE(idemctl({"help"}), 0);
    QVERIFY(outSays("reconcile"));
  }

  // The command list is built from the commands' registrations: every command, in its place, its
  // description wrapped under itself; no command is lost by the linker.
  void helpListsEveryRegisteredCommand() {
    const std::string usage = R"(usage: idemctl COMMAND [flags]

commands:
  migrate                apply the idem schema migrations to a database
  simulate               run simulated agent traffic through the protocol
  settle KEY             settle a stuck record to SUCCESS or FAILED, or correct FAILED to
                         SUCCESS (operators)
  reconcile              resolve the stuck records the ledger or the gateway's word decides,
                         once or every --every (reconcilers)
  import-statement FILE  import a gateway's statement (stripe, camt.053/054, adyen, csv) once;
                         its lines decide the UNKNOWN records they match (idem_ledger)
  ingest-callback        record a gateway's webhook event once; it decides the UNKNOWN record
                         it reports (idem_ledger)
  declare-gateway NAME   declare what a gateway carries, its settlement delay, and whether
                         its final statements' silence is evidence (owner)
  expire-leases          turn PROCESSING records past their lease into UNKNOWN
  purge                  delete settled records older than a given age, leaving tombstones
                         of their keys
  doctor                 check a live server against the durability contract (fsync,
                         synchronous commit and standbys, slots, clock)
  help                   this text; `idemctl COMMAND --help` describes a command's flags
  version                print the version

The database comes from --db.dsn, else IDEMWATCH_DSN, else libpq's environment (PGHOST, ...).
)";
    QCOMPARE(idemctl({"help"}), 0);
    QCOMPARE(out_, usage);
    QCOMPARE(idemctl({}), 2);
    QCOMPARE(err_, usage);
    QCOMPARE(idemctl({"no-such-command"}), 2);
    QCOMPARE(err_, std::string("idemctl: unknown command 'no-such-command' (try: idemctl help)\n"));
  }

  void unreachableDatabaseExitsOne() {
    QCOMPARE(idemctl({"migrate", "--db.dsn", "host=/nonexistent port=1"}), 1);
    QVERIFY(
        errSays("idemctl migrate: cannot connect to the database host=/nonexistent port=1 (from "
                "--db.dsn)"));
    QCOMPARE(std::count(err_.begin(), err_.end(), '\n'), 1L);
    QCOMPARE(idemctl({"simulate", "--db.dsn", "host=/nonexistent port=1", "--requests", "5"}), 1);
    QCOMPARE(idemctl({"reconcile", "--db.dsn", "host=/nonexistent port=1"}), 1);
  }

  // A database populated under schema contract v1 is upgraded in place, with its data, and the
  // grant check says what it found.
  void migrateUpgradesAVersionOneDatabase() {
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn(), "--up-to", "5"}), 0);
    QVERIFY(outSays("applied 001_tables.sql"));
    QVERIFY2(outSays("installed version 5 (schema contract v1)"), out_.c_str());
    QVERIFY(outSays("grants: not checked"));
    // v1 traffic: one paid order, one stuck.
    db_->exec(
        "SELECT * FROM idem.begin('v1-paid', 'payment', 'o-v1', 'pay', NULL, 'initial', '{}')");
    db_->exec("SELECT * FROM idem.complete('v1-paid', 1, '{\"gateway_ref\": \"gw-v1\"}')");
    db_->exec(
        "SELECT * FROM idem.begin('v1-stuck', 'payment', 'o-v1b', 'pay', NULL, 'initial', '{}')");
    db_->exec("SELECT * FROM idem.mark_unknown('v1-stuck', 1, 'timeout')");

    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(outSays("applied 009_v2_roles.sql"));
    QVERIFY2(outSays("upgraded from version 5 (schema contract v1) to version " + latest() +
                     " (schema contract v3)"),
             out_.c_str());
    QVERIFY2(outSays("grants: every idem function's EXECUTE grants match the contract"),
             out_.c_str());
    QCOMPARE(
        text("SELECT status || ' ' || version FROM idem.records WHERE idempotency_key = 'v1-paid'"),
        std::string("SUCCESS 2"));
    QCOMPARE(
        text(
            "SELECT status || ' ' || version FROM idem.records WHERE idempotency_key = 'v1-stuck'"),
        std::string("UNKNOWN 2"));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key LIKE 'v1-%'"),
             4LL);
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 0);
    QVERIFY2(outSays("schema up to date at version " + latest() + " (schema contract v3)"),
             out_.c_str());

    // A grant made by hand since is a hole: migrate fails loudly and names it.
    db_->exec("GRANT EXECUTE ON FUNCTION idem.reconcile() TO PUBLIC");
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 1);
    QVERIFY2(errSays("idem.reconcile() is executable by PUBLIC"), err_.c_str());
    db_->exec("REVOKE EXECUTE ON FUNCTION idem.reconcile() FROM PUBLIC");
    QCOMPARE(idemctl({"migrate", "--db.dsn", db_->dsn()}), 0);

    operator_ = db_->createLoginRole("op", "idem_operator");
    reconciler_ = db_->createLoginRole("recon", "idem_reconciler");
    writer_ = db_->createLoginRole("agent", "idem_writer");
    ledger_ = db_->createLoginRole("webhook", "idem_ledger");
  }

  void simulateShowsTheCarelessHolesRefused() {
    QCOMPARE(idemctl({"simulate", "--db.dsn", as(writer_), "--ledger-dsn", as(ledger_),
                      "--requests", "300", "--seed", "3", "--run-id", "ctl", "--response-loss-rate",
                      "0.3", "--callback-resolves-rate", "0", "--careless-rate", "0.2"}),
             0);
    QVERIFY2(outSays("operations 300"), out_.c_str());
    QVERIFY(outSays("in_progress"));
    QVERIFY2(outSays("careless clients"), out_.c_str());
    QVERIFY(!outSays("OPEN"));
  }

  void settleRefusalsEachHaveTheirExitCode() {
    lostResponse("pay-1", "o-1", true);
    const std::string dsn = as(operator_);

    // FAILED while money moved: the server refuses, and idemctl shows the flows.
    QCOMPARE(
        idemctl({"settle", "pay-1", "--to", "FAILED", "--reason", "no charge?", "--db.dsn", dsn}),
        4);
    QVERIFY2(errSays("refused by the server (side_effect_recorded)"), err_.c_str());
    QVERIFY2(errSays("DEBIT 2990 CNY (gw-o-1)"), err_.c_str());
    QVERIFY2(errSays(": DEBIT 2990 CNY (minor units), ref gw-o-1, key pay-1"), err_.c_str());
    QVERIFY(errSays("--override-side-effect"));
    // A stale version is refused and says what it is now.
    QCOMPARE(idemctl({"settle", "pay-1", "--to", "SUCCESS", "--reason", "x", "--expect-version",
                      "1", "--db.dsn", dsn}),
             3);
    QVERIFY(errSays("changed since version 1"));
    QVERIFY2(errSays("version 2: PROCESSING -> UNKNOWN by " + writer_), err_.c_str());
    QCOMPARE(text("SELECT version FROM idem.records WHERE idempotency_key = 'pay-1'"),
             std::string("2"));

    QCOMPARE(idemctl({"settle", "pay-1", "--to", "SUCCESS", "--reason",
                      "gateway statement shows the charge", "--evidence",
                      R"({"gateway_ref": "gw-o-1"})", "--expect-version", "2", "--db.dsn", dsn}),
             0);
    QVERIFY(outSays("settled pay-1 to SUCCESS"));
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key = 'pay-1'"),
             std::string("SUCCESS"));
    // SUCCESS is final, override or not.
    QCOMPARE(idemctl({"settle", "pay-1", "--to", "FAILED", "--reason", "x",
                      "--override-money-moved", "--db.dsn", dsn}),
             6);
    QVERIFY2(errSays("SUCCESS, which is final"), err_.c_str());
    QCOMPARE(idemctl({"settle", "no-such-key", "--to", "FAILED", "--reason", "x", "--db.dsn", dsn}),
             7);
    QVERIFY(errSays("no-such-key"));
    QCOMPARE(idemctl({"settle", "pay-1", "--to", "SUCCESS", "--reason", "x", "--evidence",
                      "{broken", "--db.dsn", dsn}),
             2);
  }

  void settleOfALiveLeaseSaysWhenItEnds() {
    pqxx::connection c(as(writer_));
    const BeginResult begun = ProtocolClient(c).begin(
        test::payRequest("pay-live", "o-live", "payment", std::chrono::minutes(20)));
    QCOMPARE(idemctl({"settle", "pay-live", "--to", "FAILED", "--reason", "agent looks stuck",
                      "--db.dsn", as(operator_)}),
             5);
    QVERIFY2(errSays("refused by the server (lease_active)"), err_.c_str());
    const std::string ends = text(
        "SELECT to_char(lease_expires_at AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD HH24:MI:SS') FROM idem.records WHERE "
        "idempotency_key = 'pay-live'");
    QVERIFY2(errSays("the lease ends at " + ends + " UTC, in "), err_.c_str());
    QVERIFY(errSays("its claimant may still answer"));
    QCOMPARE(text("SELECT status FROM idem.records WHERE idempotency_key = 'pay-live'"),
             std::string("PROCESSING"));
    QVERIFY(ProtocolClient(c).complete("pay-live", 1, "{}", *begun.claimToken).ok());
  }

  void overrideOfMoneyMovedIsRecordedInTheEvidence() {
    lostResponse("pay-2", "o-2", true);
    lostResponse("pay-3", "o-3", true);
    QCOMPARE(idemctl({"settle", "pay-2", "--to", "FAILED", "--reason", "  ",
                      "--override-money-moved", "--db.dsn", as(operator_)}),
             2);
    QCOMPARE(idemctl({"settle", "pay-2", "--to", "FAILED", "--reason",
                      "gateway case 991: the DEBIT was reversed before settlement",
                      "--override-money-moved", "--db.dsn", as(operator_)}),
             0);
    QVERIFY2(outSays("override of the recorded side effect is in the transition's evidence"),
             out_.c_str());
    QVERIFY2(errSays("warning: the ledger records the side effect of payment/o-2"), err_.c_str());
    QCOMPARE(
        db_->scalar("SELECT count(*) FROM idem.transitions WHERE idempotency_key = 'pay-2' AND "
                    "to_status = 'FAILED' AND evidence ? 'override_money_moved'"),
        1LL);
    // The old flag still works, and says it is deprecated.
    QCOMPARE(idemctl({"settle", "pay-3", "--to", "FAILED", "--reason", "gateway case 992",
                      "--override-debit-warning", "--db.dsn", as(operator_)}),
             0);
    QVERIFY(errSays("--override-debit-warning is deprecated, use --override-side-effect"));
  }

  void reconcileOnceResolvesWhatTheLedgerProves() {
    // The simulation's lost responses first (payments proven by their DEBIT, refunds by their
    // REFUND): more than a round names, the rest are counted.
    const long long provable = db_->scalar(
        "SELECT count(*) FROM idem.records r WHERE status = 'UNKNOWN' AND EXISTS "
        "(SELECT 1 FROM idem.fund_flows f WHERE f.idempotency_key = r.idempotency_key "
        "AND f.kind = CASE r.biz_type WHEN 'refund' THEN 'REFUND' ELSE 'DEBIT' END)");
    QVERIFY(provable > 20);
    QCOMPARE(idemctl({"reconcile", "--db.dsn", as(reconciler_)}), 0);
    QVERIFY2(outSays("resolved " + std::to_string(provable) + " record(s) to SUCCESS: ctl-"),
             out_.c_str());
    QVERIFY2(outSays(", and " + std::to_string(provable - 20) + " more\n"), out_.c_str());

    lostResponse("pay-r1", "o-r1", true);
    lostResponse("pay-r2", "o-r2", true);
    lostResponse("pay-r3", "o-r3", false);  // no flow: not evidence, it stays for a person
    // Only an idem_reconciler may.
    QCOMPARE(idemctl({"reconcile", "--db.dsn", as(writer_)}), 1);
    QVERIFY2(errSays("is not a member of idem_reconciler"), err_.c_str());
    QCOMPARE(idemctl({"reconcile", "--db.dsn", as(reconciler_)}), 0);
    QVERIFY2(outSays("reconcile: resolved 2 record(s) to SUCCESS: pay-r1 (from UNKNOWN), pay-r2 "
                     "(from UNKNOWN)"),
             out_.c_str());
    QCOMPARE(text("SELECT string_agg(idempotency_key || '=' || status, ',' ORDER BY "
                  "idempotency_key) FROM "
                  "idem.records WHERE idempotency_key LIKE 'pay-r%'"),
             std::string("pay-r1=SUCCESS,pay-r2=SUCCESS,pay-r3=UNKNOWN"));
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.transitions WHERE actor_kind = 'reconciler' "
                         "AND idempotency_key LIKE 'pay-r%' AND actor = '" +
                         reconciler_ + "'"),
             2LL);
    QCOMPARE(idemctl({"reconcile", "--db.dsn", as(reconciler_)}), 0);
    QVERIFY2(outSays("resolved 0 record(s)"), out_.c_str());
  }

  // The service form: a round every --every until SIGTERM, each printing what it resolved; a
  // failed round (here: the login lost its role for a while) is reported and the loop goes on.
  // Run as the real binary, so the signal really arrives.
  void reconcileEveryRunsUntilSigterm() {
    QProcess p;
    p.start(IDEMCTL_BINARY,
            {"reconcile", "--every", "100ms", "--db.dsn", QString::fromStdString(as(reconciler_))});
    QVERIFY(p.waitForStarted());
    std::string out, err;
    auto waitFor = [&](const std::string& what, const std::string& in = "out") {
      const std::string& where = in == "out" ? out : err;
      QDeadlineTimer deadline(60'000);
      while (where.find(what) == std::string::npos && !deadline.hasExpired() &&
             p.state() == QProcess::Running) {
        p.waitForReadyRead(200);
        out += p.readAllStandardOutput().toStdString();
        err += p.readAllStandardError().toStdString();
      }
      return where.find(what) != std::string::npos;
    };
    QVERIFY2(waitFor("a round every 100ms until SIGINT or SIGTERM"), out.c_str());
    QVERIFY2(waitFor("resolved 0 record(s)"), out.c_str());
    lostResponse("pay-loop", "o-loop", true);
    QVERIFY2(waitFor("resolved 1 record(s) to SUCCESS: pay-loop (from UNKNOWN)"), out.c_str());

    db_->exec("REVOKE idem_reconciler FROM " + reconciler_);
    QVERIFY2(waitFor("idemctl reconcile: reconcile: permission denied", "err"), err.c_str());
    db_->exec("GRANT idem_reconciler TO " + reconciler_);
    lostResponse("pay-loop2", "o-loop2", true);
    QVERIFY2(waitFor("resolved 1 record(s) to SUCCESS: pay-loop2 (from UNKNOWN)"), out.c_str());

    p.terminate();  // SIGTERM
    QVERIFY(p.waitForFinished(30'000));
    out += p.readAllStandardOutput().toStdString();
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 0);
    QVERIFY2(out.find("reconcile: stopped") != std::string::npos, out.c_str());
    QCOMPARE(text("SELECT string_agg(status, ',' ORDER BY idempotency_key) FROM idem.records "
                  "WHERE idempotency_key LIKE 'pay-loop%'"),
             std::string("SUCCESS,SUCCESS"));
  }

  void purgeReportsTombstonesAndTheKeysStayRetired() {
    QTest::qWait(20);  // every settled record is now older than the 10ms below
    const long long settled =
        db_->scalar("SELECT count(*) FROM idem.records WHERE status IN ('SUCCESS', 'FAILED')");
    QVERIFY(settled > 0);
    const long long stuck =
        db_->scalar("SELECT count(*) FROM idem.records WHERE status IN ('PROCESSING', 'UNKNOWN')");
    QVERIFY(settled > 2);
    // Two records a transaction: the batches add up to the same counts.
    QCOMPARE(idemctl({"purge", "--older-than", "10ms", "--batch", "2", "--db.dsn", db_->dsn()}), 0);
    QVERIFY2(outSays("purged rows older than 10ms: " + std::to_string(settled) + " records"),
             out_.c_str());
    QVERIFY2(outSays(std::to_string(settled) + " tombstones written"), out_.c_str());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.retired_keys"), settled);
    // Stuck records stay, history and all.
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records"), stuck);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records r WHERE NOT EXISTS (SELECT 1 FROM "
                         "idem.transitions t WHERE t.idempotency_key = r.idempotency_key)"),
             0LL);
    // A late retry of a purged key is retired, never executed.
    pqxx::connection c(as(writer_));
    QCOMPARE(ProtocolClient(c).begin(test::payRequest("pay-1", "o-1")).outcome, Outcome::Retired);
  }

  // doctor reads the server it reaches: each setting as SHOW gives it, a protocol login's own
  // synchronous_commit, an inactive slot; one line a finding, exit 1 on a problem.
  void doctorNamesWhatBreaksTheDurabilityContract() {
    const std::string fsync = text("SHOW fsync");
    const std::string careless = db_->createLoginRole("careless", "idem_writer");
    const std::string cautious = db_->createLoginRole("cautious", "idem_ledger");
    db_->exec("ALTER ROLE " + careless + " IN DATABASE " + db_->name() +
              " SET synchronous_commit = off");
    db_->exec("ALTER ROLE " + cautious + " SET synchronous_commit = remote_apply");
    const std::string slot = "doctor_" + db_->name();
    db_->exec("SELECT pg_create_physical_replication_slot('" + slot + "', true)");
    const int code = idemctl({"doctor", "--db.dsn", db_->dsn()});
    db_->exec("SELECT pg_drop_replication_slot('" + slot + "')");
    QCOMPARE(code, 1);
    QVERIFY2(outSays("PROBLEM synchronous_commit: login " + careless +
                     " (set on its role in this database) has synchronous_commit = off: a crash "
                     "of PostgreSQL loses the last claims it acknowledged"),
             out_.c_str());
    QVERIFY2(!outSays(cautious), out_.c_str());  // remote_apply keeps the contract
    QVERIFY2(outSays(fsync == "on" ? "ok      fsync: fsync is on\n"
                                   : "PROBLEM fsync: fsync is off: a crash of the machine"),
             out_.c_str());
    QVERIFY2(outSays("replication_slots: replication slot " + slot + " is inactive and holds "),
             out_.c_str());
    QVERIFY2(outSays("note    synchronous_standby: no standby streams from this primary"),
             out_.c_str());

    // Fixed, the same server passes but for what the test cannot change (its fsync).
    db_->exec("ALTER ROLE " + careless + " IN DATABASE " + db_->name() +
              " RESET synchronous_commit");
    QCOMPARE(
        idemctl({"doctor", "--json", "--db.dsn", db_->dsn()}),
        fsync == "on" && text("SHOW full_page_writes") == "on" &&
                text("SELECT reset_val FROM pg_settings WHERE name = 'synchronous_commit'") != "off"
            ? 0
            : 1);
    const auto doc = nlohmann::json::parse(out_);
    std::vector<std::string> checks;
    for (const auto& f : doc["findings"]) {
      if (checks.empty() || checks.back() != f["check"]) checks.push_back(f["check"]);
    }
    QCOMPARE(checks,
             (std::vector<std::string>{"fsync", "full_page_writes", "synchronous_commit",
                                       "synchronous_standby", "replication_slots", "clock"}));
    QVERIFY(out_.find(careless) == std::string::npos);
  }

  void maintenanceCommands() {
    QCOMPARE(idemctl({"expire-leases", "--db.dsn", db_->dsn()}), 0);
    QVERIFY(outSays("past their lease"));
    QCOMPARE(idemctl({"version"}), 0);
    QVERIFY(out_.starts_with("idemctl "));
  }
};

QTEST_GUILESS_MAIN(TestIdemctl)
#include "tst_idemctl.moc"

// One classification of database errors (DatabaseError::kind), reached from real server errors:
// a statement_timeout is QueryCancelled, a unique violation Constraint, a killed backend
// ConnectionLost, libpq's password texts NeedsPassword; and every public function of shared that
// touches the database answers in DatabaseError, never in a libpqxx exception, even when the
// connection dies under it.
#include <libpq-fe.h>

#include <QtTest>
#include <functional>
#include <memory>
#include <pqxx/pqxx>

#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "idem/record_queries.hpp"
#include "idem/settlement.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

// What fn threw: a DatabaseError, or a failure naming the exception that escaped instead.
std::optional<DatabaseError> caught(const std::function<void()>& fn, std::string& escaped) {
  try {
    fn();
  } catch (const DatabaseError& e) {
    return e;
  } catch (const std::exception& e) {
    escaped = std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    escaped = "a non-std exception";
  }
  return std::nullopt;
}

}  // namespace

class TestDatabaseError : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;

  // A connection whose backend another session has just terminated: libpq has not noticed yet,
  // the next statement finds out.
  std::unique_ptr<pqxx::connection> killedConnection() {
    auto c = db_->connect();
    const int pid = pqxx::nontransaction(*c).exec1("SELECT pg_backend_pid()")[0].as<int>();
    db_->exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
    // pg_terminate_backend only signals: wait until the backend is gone.
    for (int i = 0; i < 200; ++i) {
      if (db_->scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid)) ==
          0) {
        break;
      }
      QTest::qWait(10);
    }
    return c;
  }

  void expectKind(const std::function<void()>& fn, DatabaseErrorKind kind, const char* what) {
    std::string escaped;
    const std::optional<DatabaseError> e = caught(fn, escaped);
    QVERIFY2(e.has_value(), (std::string(what) + " let through " + escaped).c_str());
    QVERIFY2(e->kind() == kind,
             (std::string(what) + ": " + e->sqlstate() + " " + e->what()).c_str());
  }

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_database_error"); }

  void statementTimeoutIsQueryCancelledAndKeepsTheSession() {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("SET statement_timeout = 50");
    expectKind([&] { translatingErrors("sleep", [&] { tx.exec("SELECT pg_sleep(2)"); }); },
               DatabaseErrorKind::QueryCancelled, "a statement timeout");
    QCOMPARE(tx.exec1("SELECT 1")[0].as<int>(), 1);  // the session is still fine
  }

  void uniqueViolationIsConstraint() {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    tx.exec("CREATE TEMP TABLE once (k int PRIMARY KEY); INSERT INTO once VALUES (1)");
    std::string escaped;
    const auto e = caught(
        [&] { translatingErrors("insert", [&] { tx.exec("INSERT INTO once VALUES (1)"); }); },
        escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QCOMPARE(e->kind(), DatabaseErrorKind::Constraint);
    QCOMPARE(e->sqlstate(), std::string("23505"));
    QVERIFY(!e->endsSession());
  }

  // A program newer than its schema calls a function the schema does not have yet: the error says
  // what to do. Another missing function is left in PostgreSQL's words.
  void aSchemaOlderThanTheProgramSaysToMigrate() {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    std::string escaped;
    auto e = caught(
        [&] { translatingErrors("read", [&] { tx.exec("SELECT idem.from_a_later_version(1)"); }); },
        escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QCOMPARE(e->sqlstate(), std::string("42883"));
    QVERIFY2(std::string(e->what()).find("run `idemctl migrate`") != std::string::npos, e->what());
    e = caught([&] { translatingErrors("read", [&] { tx.exec("SELECT no_such_function(1)"); }); },
               escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QVERIFY(std::string(e->what()).find("idemctl migrate") == std::string::npos);
  }

  void serializationFailureIsRetryable() {
    auto c = db_->connect();
    pqxx::nontransaction tx(*c);
    expectKind(
        [&] {
          translatingErrors("raise", [&] {
            tx.exec(
                "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'serialization_failure'; END $$");
          });
        },
        DatabaseErrorKind::Serialization, "a serialization failure");
  }

  void killedBackendIsConnectionLost() {
    auto c = killedConnection();
    std::string escaped;
    const auto e = caught(
        [&] { translatingErrors("select", [&] { pqxx::nontransaction(*c).exec("SELECT 1"); }); },
        escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QCOMPARE(e->kind(), DatabaseErrorKind::ConnectionLost);
    QVERIFY(e->endsSession());
  }

  // The throwaway cluster trusts every local connection, so libpq's texts stand in for a server
  // that asks for a password: they are what libpq 15 says, with no SQLSTATE.
  void passwordTextsAreNeedsPassword_data() {
    QTest::addColumn<QString>("text");
    QTest::newRow("refused") << QStringLiteral(
        "connection to server at \"db\" (10.0.0.5), port 5432 failed: FATAL:  password "
        "authentication failed for user \"idem_reader\"\n");
    QTest::newRow("missing") << QStringLiteral(
        "connection to server on socket \"/run/postgresql/.s.PGSQL.5432\" failed: "
        "fe_sendauth: no password supplied\n");
  }
  void passwordTextsAreNeedsPassword() {
    QFETCH(QString, text);
    std::string escaped;
    const auto e = caught(
        [&] {
          translatingErrors("connect", [&] { throw pqxx::broken_connection(text.toStdString()); });
        },
        escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QCOMPARE(e->kind(), DatabaseErrorKind::NeedsPassword);
    QVERIFY(e->endsSession());
  }

  void unreachableServerIsConnectionLostNotPassword() {
    ConnectionSettings s;
    s.dsn = "host=127.0.0.1 port=1 connect_timeout=2";
    s.source = "test";
    expectKind([&] { idem::connect(s); }, DatabaseErrorKind::ConnectionLost,
               "an unreachable server");
  }

  // Every public function of shared that touches the database, on a connection that died.
  void sharedLetsNoLibpqxxExceptionThrough_data() {
    QTest::addColumn<int>("call");
    const char* names[] = {"settleRecord", "assessSettle", "ProtocolClient::begin",
                           "findRecord",   "migrate",      "functionGrantDifferences",
                           "reconcile"};
    for (int i = 0; i < static_cast<int>(std::size(names)); ++i) QTest::newRow(names[i]) << i;
  }
  void sharedLetsNoLibpqxxExceptionThrough() {
    QFETCH(int, call);
    auto c = killedConnection();
    const std::function<void()> calls[] = {
        [&] {
          SettleRequest r;
          r.key = "k1";
          r.reason = "checked the gateway";
          settleRecord(*c, r);
        },
        [&] { assessSettle(*c, "k1", RecordStatus::Failed); },
        [&] {
          BeginRequest r;
          r.key = "k1";
          r.bizType = "b";
          r.bizId = "o1";
          r.tool = "t";
          ProtocolClient(*c).begin(r);
        },
        [&] {
          pqxx::nontransaction tx(*c);
          findRecord(tx, "k1");
        },
        [&] { migrate(*c, bundledMigrations()); },
        [&] {
          pqxx::nontransaction tx(*c);
          functionGrantDifferences(tx);
        },
        [&] { ProtocolClient(*c).reconcile(); },
    };
    expectKind(calls[call], DatabaseErrorKind::ConnectionLost, "a call on a dead connection");
  }

  // What the server answers for a prepared statement that is not there as the session left it,
  // in the server's own words, is recognised as such (a claim then runs again unnamed); any other
  // error of the same class is not.
  void aLostPreparedStatementIsRecognised() {
    db_->exec("CREATE TABLE IF NOT EXISTS public.plan_shape (k int)");
    auto c = db_->connect();
    const auto lost = [&](const std::string& sql) {
      std::string escaped;
      const auto e = caught(
          [&] {
            translatingErrors("statement", [&] {
              pqxx::nontransaction tx(*c);
              tx.exec(sql);
            });
          },
          escaped);
      if (!e) throw std::runtime_error("no database error from " + sql + ": " + escaped);
      return std::pair(e->sqlstate(), preparedStatementLost(*e));
    };
    QCOMPARE(lost("EXECUTE no_such_statement"), std::pair(std::string("26000"), true));
    {
      pqxx::nontransaction tx(*c);
      tx.exec("PREPARE shape AS SELECT * FROM public.plan_shape");
    }
    QCOMPARE(lost("PREPARE shape AS SELECT 1"), std::pair(std::string("42P05"), true));
    db_->exec("ALTER TABLE public.plan_shape ADD COLUMN v int");
    QCOMPARE(lost("EXECUTE shape"), std::pair(std::string("0A000"), true));
    // libpq callers (the proxy) carry the server's routine, so a stale plan is known whatever the
    // language of the server's messages.
    {
      std::unique_ptr<PGconn, decltype(&PQfinish)> raw(PQconnectdb(db_->dsn().c_str()), &PQfinish);
      QCOMPARE(PQstatus(raw.get()), CONNECTION_OK);
      PQclear(PQexec(raw.get(), "PREPARE shape2 AS SELECT * FROM public.plan_shape"));
      db_->exec("ALTER TABLE public.plan_shape ADD COLUMN w int");
      std::unique_ptr<PGresult, decltype(&PQclear)> answer(PQexec(raw.get(), "EXECUTE shape2"),
                                                           &PQclear);
      const char* state = PQresultErrorField(answer.get(), PG_DIAG_SQLSTATE);
      const char* routine = PQresultErrorField(answer.get(), PG_DIAG_SOURCE_FUNCTION);
      QVERIFY(state != nullptr && routine != nullptr);
      const DatabaseError stale = serverError(
          "claim", state, "FEHLER:  gecachter Plan darf den Ergebnistyp nicht ändern\n", routine);
      QCOMPARE(stale.routine(), std::string("RevalidateCachedQuery"));
      QVERIFY(preparedStatementLost(stale));
    }
    QVERIFY(!preparedStatementLost(DatabaseError("0A000", "some feature is not supported")));
    QVERIFY(!preparedStatementLost(
        DatabaseError("0A000", "eine Funktion wird nicht unterstützt", "ExecInitFunctionScan")));
    QVERIFY(!preparedStatementLost(DatabaseError("40001", "could not serialize access")));
    // A claim sent prepared through libpqxx, which passes no routine on, runs again unnamed on a
    // stale plan whatever the server's language; not on an error the server's routine names as
    // something else, nor on another class.
    QVERIFY(runsAgainUnnamed(
        DatabaseError("0A000", "FEHLER:  gecachter Plan darf den Ergebnistyp nicht ändern")));
    QVERIFY(runsAgainUnnamed(DatabaseError("26000", "prepared statement does not exist")));
    QVERIFY(!runsAgainUnnamed(
        DatabaseError("0A000", "eine Funktion wird nicht unterstützt", "ExecInitFunctionScan")));
    QVERIFY(!runsAgainUnnamed(DatabaseError("40001", "could not serialize access")));
    db_->exec("DROP TABLE public.plan_shape");
  }

  // A migration that changes a protocol function's result type under a client that has its
  // claims prepared: the next call meets a stale plan, runs again unnamed, and answers.
  void aPreparedClaimOutlivesAChangedResultType() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    const auto claim = [&](const std::string& key) {
      const BeginResult begun = client.begin(test::payRequest(key, "o-" + key));
      // (value() throws unless it ran: a claim token comes with Executed only.)
      return client.complete(key, begun.version.value(), "{}", begun.claimToken.value());
    };
    QVERIFY(claim("k-shape-1").ok());
    const std::string original = [&] {
      auto owner = db_->connect();
      pqxx::work tx(*owner);
      return tx
          .exec1(
              "SELECT pg_get_functiondef('idem.complete(text, integer, jsonb, uuid)'"
              "::regprocedure)")[0]
          .as<std::string>();
    }();
    std::string changed = original;
    const std::string from = "OUT version integer";
    const std::size_t at = changed.find(from);
    QVERIFY(at != std::string::npos);
    changed.replace(at, from.size(), "OUT version bigint");
    const auto replace = [&](const std::string& definition) {
      auto owner = db_->connect();
      pqxx::work tx(*owner);
      tx.exec("DROP FUNCTION idem.complete(text, integer, jsonb, uuid)");
      tx.exec(definition);
      tx.commit();
    };
    replace(changed);
    const auto answer = claim("k-shape-2");
    replace(original);
    QVERIFY(answer.ok());
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.records WHERE idempotency_key = 'k-shape-2' "
                         "AND status = 'SUCCESS'"),
             1);
  }

  // A failure at commit time: a deferred constraint fires in COMMIT, after every statement
  // succeeded. The migration's own transaction is the one shared commits itself.
  void failureAtCommitIsTranslated() {
    db_->exec(
        "CREATE TABLE IF NOT EXISTS public.commit_check (k int, CONSTRAINT once UNIQUE (k) "
        "DEFERRABLE INITIALLY DEFERRED)");
    Migration twice{999, "999_twice.sql", "INSERT INTO public.commit_check VALUES (1), (1);"};
    std::vector<Migration> migrations = bundledMigrations();  // a copy
    migrations.push_back(twice);
    auto c = db_->connect();
    std::string escaped;
    const auto e = caught([&] { migrate(*c, migrations); }, escaped);
    QVERIFY2(e.has_value(), escaped.c_str());
    QCOMPARE(e->kind(), DatabaseErrorKind::Constraint);
    QCOMPARE(db_->scalar("SELECT count(*) FROM idem.schema_migrations WHERE version = 999"), 0LL);
    db_->exec("DROP TABLE public.commit_check");
  }
};

QTEST_GUILESS_MAIN(TestDatabaseError)
#include "tst_database_error.moc"

// Flags and durations: what every idemwatch program accepts, and the one-line errors it gives.
#include <QtTest>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"

using namespace idem;
using namespace std::chrono_literals;

class TestCommandLine : public QObject {
  Q_OBJECT
  const std::vector<FlagSpec> specs_{{"db.dsn", true, "DSN", ""},
                                     {"agents", true, "N", ""},
                                     {"rate", true, "R", ""},
                                     {"window", true, "D", ""},
                                     {"quiet", false, "", ""}};

  QString usageError(const std::vector<std::string>& args) {
    try {
      const CommandLine cli(args, specs_);
      cli.integer("agents", 1, 10);
      cli.number("rate", 0, 1);
      cli.duration("window");
    } catch (const UsageError& e) {
      return QString::fromUtf8(e.what());
    }
    return {};
  }

 private slots:
  void durationsParseAndFormat() {
    QCOMPARE(parseDuration("5s"), std::optional(std::chrono::milliseconds(5s)));
    QCOMPARE(parseDuration("1m30s"), std::optional(std::chrono::milliseconds(90s)));
    QCOMPARE(parseDuration("250ms"), std::optional(250ms));
    QCOMPARE(parseDuration("24h"), std::optional(std::chrono::milliseconds(24h)));
    QCOMPARE(parseDuration("7d"), std::optional(std::chrono::milliseconds(168h)));
    QCOMPARE(parseDuration("0"), std::optional(0ms));
    for (const char* bad : {"", "5", "s", "5 s", "-5s", "5sec", "1.5s", "5s3"}) {
      QVERIFY2(!parseDuration(bad), bad);
    }
    QCOMPARE(formatDuration(90s), std::string("1m30s"));
    QCOMPARE(formatDuration(0ms), std::string("0s"));
    QCOMPARE(formatDuration(std::chrono::milliseconds(25h)), std::string("1d1h"));
    QCOMPARE(formatDuration(std::chrono::milliseconds(720h)), std::string("30d"));
    QVERIFY(!parseDuration("30s1m"));  // largest unit first, as Prometheus reads them
  }

  void flagsInBothSpellings() {
    const CommandLine cli({"--agents=4", "--db.dsn", "host=x", "--quiet", "extra"}, specs_);
    QCOMPARE(cli.integer("agents", 1, 10), std::optional(4LL));
    QCOMPARE(cli.value("db.dsn"), std::optional<std::string>("host=x"));
    QVERIFY(cli.has("quiet"));
    QCOMPARE(cli.positionals(), std::vector<std::string>{"extra"});
  }

  void badFlagsNameTheProblem() {
    QCOMPARE(usageError({"--agent=4"}), QStringLiteral("unknown flag --agent (see --help)"));
    QCOMPARE(usageError({"--agents"}), QStringLiteral("--agents needs a value (N)"));
    QCOMPARE(usageError({"--agents=four"}),
             QStringLiteral("--agents must be a whole number, got 'four'"));
    QCOMPARE(usageError({"--agents=11"}),
             QStringLiteral("--agents must be between 1 and 10, got 11"));
    QCOMPARE(usageError({"--rate=2"}), QStringLiteral("--rate must be between 0 and 1, got 2"));
    QCOMPARE(usageError({"--window=5 minutes"}),
             QStringLiteral(
                 "--window must be a duration such as 500ms, 5s, 1m or 24h, got '5 minutes'"));
    QCOMPARE(usageError({"--quiet=yes"}), QStringLiteral("--quiet takes no value"));
    QCOMPARE(usageError({"--agents=1", "--agents=2"}), QStringLiteral("--agents is given twice"));
    QCOMPARE(usageError({"--agents=2"}), QString());
  }

  void dsnResolutionOrder() {
    qputenv("IDEMWATCH_DSN", "host=from-env");
    QCOMPARE(ConnectionSettings::resolve(std::string("host=from-flag")).source,
             std::string("--db.dsn"));
    QCOMPARE(ConnectionSettings::resolve(std::nullopt).dsn, std::string("host=from-env"));
    qunsetenv("IDEMWATCH_DSN");
    const ConnectionSettings libpq = ConnectionSettings::resolve(std::nullopt);
    QCOMPARE(libpq.source, std::string("libpq environment"));
    QVERIFY(libpq.dsn.empty());
  }

  void passwordsAreRedacted() {
    ConnectionSettings s;
    s.dsn = "host=db password='s3cret pass' user=alice";
    QCOMPARE(s.redacted(), std::string("host=db password=*** user=alice"));
    s.dsn = "postgresql://alice:s3cret@db:5432/idem";
    QCOMPARE(s.redacted(), std::string("postgresql://alice:***@db:5432/idem"));
  }

  void effectiveDsnAddsTimeouts() {
    ConnectionSettings s;
    s.dsn = "host=db";
    s.statementTimeout = 2000ms;
    s.applicationName = "idemwatch-test";
    const std::string dsn = s.effectiveDsn();
    QVERIFY2(dsn.find("connect_timeout='5'") != std::string::npos, dsn.c_str());
    QVERIFY2(dsn.find("statement_timeout=2000") != std::string::npos, dsn.c_str());
    s.dsn = "postgresql://db/idem";
    QVERIFY2(s.effectiveDsn().find("postgresql://db/idem?connect_timeout=5&") == 0,
             s.effectiveDsn().c_str());
  }

  void unreachableDatabaseIsOneClearLine() {
    ConnectionSettings s;
    s.dsn = "host=/nonexistent-socket-dir port=1";
    s.source = "--db.dsn";
    try {
      idem::connect(s);
      QFAIL("connected to nothing");
    } catch (const DatabaseError& e) {
      const QString message = QString::fromUtf8(e.what());
      QVERIFY2(message.startsWith("cannot connect to the database host=/nonexistent-socket-dir "
                                  "port=1 (from --db.dsn): "),
               e.what());
      QVERIFY(!message.contains('\n'));
      QVERIFY(e.isConnectionLoss());
    }
    s.dsn = "hots=typo";
    QVERIFY_THROWS_EXCEPTION(DatabaseError, idem::connect(s));
  }
};

QTEST_GUILESS_MAIN(TestCommandLine)
#include "tst_command_line.moc"

// Flags and durations: what every idemwatch program accepts, and the one-line errors it gives.
#include <QtTest>
#include <sstream>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/duration.hpp"

using namespace idem;
using namespace std::chrono_literals;

// The flags of the tests below, declared as a program declares them.
struct Flags {
  std::optional<std::string> dsn;
  int agents = 4;
  double rate = 0.5;
  std::chrono::milliseconds window{5000};
  std::optional<std::chrono::milliseconds> every;
  std::vector<std::string> types{"payment"};
  bool quiet = false;
  std::string mode = "fast";
  std::vector<std::string> positionals;

  void declare(CommandLine& cli) {
    cli.text("db.dsn", "DSN", "where", dsn);
    cli.integer("agents", "N", "how many", agents, 1, 10);
    cli.number("rate", "R", "how often", rate, 0, 1);
    cli.duration("window", "how long", window, 1s);
    cli.duration("every", "how often", every);
    cli.list("biz-types", "LIST", "which", types);
    cli.flag("quiet", "no progress", quiet);
    cli.custom("mode", "MODE", "fast or slow", mode, [this](const std::string& v) {
      if (v != "fast" && v != "slow") throw badValue("mode", "fast or slow", v);
      mode = v;
    });
  }
};

class TestCommandLine : public QObject {
  Q_OBJECT

  // The message of the UsageError `args` give, empty when they parse.
  static QString usageError(const std::vector<std::string>& args, bool positionals = false) {
    Flags flags;
    CommandLine cli("prog", "prog [flags]");
    flags.declare(cli);
    if (positionals) cli.positionals(flags.positionals, 1);
    std::ostringstream out;
    try {
      cli.parse(args, out);
    } catch (const UsageError& e) {
      return QString::fromUtf8(e.what());
    }
    return {};
  }

 private slots:
  void aRepeatableFlagTakesEveryValueInOrder() {
    std::vector<std::string> seen;
    CommandLine cli("prog", "prog [flags]");
    cli.each("set", "NAME=VALUE", "a variable", [&](const std::string& v) { seen.push_back(v); });
    bool quiet = false;
    cli.flag("quiet", "no progress", quiet);
    std::ostringstream out;
    QVERIFY(cli.parse({"--set", "a=1", "--quiet", "--set=b=2", "--set", "c="}, out));
    QCOMPARE(seen, (std::vector<std::string>{"a=1", "b=2", "c="}));
    // Still one wording for a missing value, and other flags still refuse a repeat.
    CommandLine strict("prog", "prog [flags]");
    strict.each("set", "NAME=VALUE", "a variable", [](const std::string&) {});
    strict.flag("quiet", "no progress", quiet);
    try {
      strict.parse({"--set=a=1", "--set"}, out);
      QFAIL("a --set without a value was accepted");
    } catch (const UsageError& e) {
      QCOMPARE(QString::fromUtf8(e.what()), QStringLiteral("--set needs a value (NAME=VALUE)"));
    }
    try {
      strict.parse({"--quiet", "--quiet"}, out);
      QFAIL("a repeated switch was accepted");
    } catch (const UsageError& e) {
      QCOMPARE(QString::fromUtf8(e.what()), QStringLiteral("--quiet is given twice"));
    }
  }

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
    Flags flags;
    CommandLine cli("prog", "prog [flags]");
    flags.declare(cli);
    cli.positionals(flags.positionals);
    std::ostringstream out;
    QVERIFY(cli.parse({"--agents=4", "--db.dsn", "host=x", "--quiet", "extra", "--every", "1m",
                       "--biz-types", "a, b", "--rate=0.25", "--mode", "slow", "--window=2s"},
                      out));
    QCOMPARE(flags.agents, 4);
    QCOMPARE(flags.dsn, std::optional<std::string>("host=x"));
    QVERIFY(flags.quiet);
    QCOMPARE(flags.positionals, std::vector<std::string>{"extra"});
    QCOMPARE(flags.every, std::optional<std::chrono::milliseconds>(1min));
    QCOMPARE(flags.types, (std::vector<std::string>{"a", "b"}));
    QCOMPARE(flags.rate, 0.25);
    QCOMPARE(flags.mode, std::string("slow"));
    QCOMPARE(flags.window, std::chrono::milliseconds(2s));
    QVERIFY(out.str().empty());
  }

  void absentFlagsKeepTheirDefaults() {
    Flags flags;
    CommandLine cli("prog", "prog [flags]");
    flags.declare(cli);
    std::ostringstream out;
    QVERIFY(cli.parse({}, out));
    QCOMPARE(flags.agents, 4);
    QCOMPARE(flags.dsn, std::nullopt);
    QCOMPARE(flags.every, std::nullopt);
    QCOMPARE(flags.types, std::vector<std::string>{"payment"});
    QVERIFY(!flags.quiet);
  }

  // One row a mistake: the arguments, whether prog takes one positional argument, and the one line
  // it is refused with (empty: accepted).
  void badFlagsNameTheProblem_data() {
    QTest::addColumn<std::vector<std::string>>("args");
    QTest::addColumn<bool>("positionals");
    QTest::addColumn<QString>("message");
    QTest::newRow("--agent=4") << std::vector<std::string>{"--agent=4"} << false
                               << QStringLiteral("unknown flag --agent (see --help)");
    QTest::newRow("-x") << std::vector<std::string>{"-x"} << false
                        << QStringLiteral("unknown flag -x (see --help)");
    QTest::newRow("--agents") << std::vector<std::string>{"--agents"} << false
                              << QStringLiteral("--agents needs a value (N)");
    QTest::newRow("--agents --quiet") << std::vector<std::string>{"--agents", "--quiet"} << false
                                      << QStringLiteral("--agents needs a value (N)");
    QTest::newRow("--agents=") << std::vector<std::string>{"--agents="} << false
                               << QStringLiteral("--agents needs a value (N)");
    QTest::newRow("--agents=four") << std::vector<std::string>{"--agents=four"} << false
                                   << QStringLiteral("--agents must be a whole number, got 'four'");
    QTest::newRow("--agents=11") << std::vector<std::string>{"--agents=11"} << false
                                 << QStringLiteral("--agents must be between 1 and 10, got 11");
    QTest::newRow("--rate=fast") << std::vector<std::string>{"--rate=fast"} << false
                                 << QStringLiteral("--rate must be a number, got 'fast'");
    QTest::newRow("--rate=2") << std::vector<std::string>{"--rate=2"} << false
                              << QStringLiteral("--rate must be between 0 and 1, got 2");
    QTest::newRow("--window=5 minutes")
        << std::vector<std::string>{"--window=5 minutes"} << false
        << QStringLiteral(
               "--window must be a duration such as 500ms, 5s, 1m or 24h, got '5 minutes'");
    QTest::newRow("--window=10ms") << std::vector<std::string>{"--window=10ms"} << false
                                   << QStringLiteral("--window must be at least 1s, got 10ms");
    QTest::newRow("--biz-types=a,,b")
        << std::vector<std::string>{"--biz-types=a,,b"} << false
        << QStringLiteral("--biz-types must be a list without an empty item, got 'a,,b'");
    QTest::newRow("--mode=medium") << std::vector<std::string>{"--mode=medium"} << false
                                   << QStringLiteral("--mode must be fast or slow, got 'medium'");
    QTest::newRow("--quiet=yes") << std::vector<std::string>{"--quiet=yes"} << false
                                 << QStringLiteral("--quiet takes no value");
    QTest::newRow("--quiet=true") << std::vector<std::string>{"--quiet=true"} << false
                                  << QStringLiteral("--quiet takes no value");
    QTest::newRow("--agents=1 --agents=2") << std::vector<std::string>{"--agents=1", "--agents=2"}
                                           << false << QStringLiteral("--agents is given twice");
    QTest::newRow("--quiet --quiet") << std::vector<std::string>{"--quiet", "--quiet"} << false
                                     << QStringLiteral("--quiet is given twice");
    QTest::newRow("stray") << std::vector<std::string>{"stray"} << false
                           << QStringLiteral("unexpected argument 'stray'");
    QTest::newRow("one two (positional)") << std::vector<std::string>{"one", "two"} << true
                                          << QStringLiteral("unexpected argument 'two'");
    QTest::newRow("one (positional)") << std::vector<std::string>{"one"} << true << QString();
    QTest::newRow("--agents=2") << std::vector<std::string>{"--agents=2"} << false << QString();
  }
  void badFlagsNameTheProblem() {
    QFETCH(std::vector<std::string>, args);
    QFETCH(bool, positionals);
    QFETCH(QString, message);
    QCOMPARE(usageError(args, positionals), message);
  }

  void helpIsGeneratedFromTheDeclarations() {
    Flags flags;
    CommandLine cli("prog", "prog [flags]", "What prog does.");
    flags.declare(cli);
    std::ostringstream out;
    QVERIFY(!cli.parse({"--agents=1", "--help"}, out));
    const std::string help = out.str();
    QVERIFY2(help.starts_with("usage: prog [flags]\n"), help.c_str());
    for (const char* line : {"  --agents=N", "how many (default 4)", "  --window=DURATION",
                             "(default 5s)", "  --quiet ", "no progress\n", "(default payment)",
                             "  -h, --help", "  --version", "What prog does."}) {
      QVERIFY2(help.find(line) != std::string::npos, line);
    }
    QVERIFY2(help.find("--db.dsn=DSN") != std::string::npos, help.c_str());
    std::ostringstream version;
    QVERIFY(!cli.parse({"--version"}, version));
    QVERIFY(version.str().starts_with(std::string("prog ") + IDEMWATCH_VERSION + " (revision "));
  }

  // Every main ends here: one line, 2 for a usage error, 1 for anything else, never terminate.
  void guardedMainTurnsEveryExceptionIntoOneLine() {
    QCOMPARE(guardedMain("prog", [] { return 0; }), 0);
    QCOMPARE(guardedMain("prog", []() -> int { throw UsageError("bad"); }), 2);
    QCOMPARE(guardedMain("prog", []() -> int { throw std::runtime_error("broken"); }), 1);
    QCOMPARE(guardedMain("prog", []() -> int { throw 42; }), 1);
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

  // Redaction goes through libpq's own parser: every spelling of a password libpq accepts is
  // hidden, in both forms, and what is shown is what libpq read.
  void passwordsAreRedactedHoweverTheyAreSpelled() {
    const std::pair<const char*, const char*> cases[] = {
        {"host=db password='s3cret pass' user=alice", "user=alice password=*** host=db"},
        {"postgresql://alice:s3cret@db:5432/idem",
         "user=alice password=*** dbname=idem host=db port=5432"},
        // An escaped quote inside the quoted value, and the tail after it.
        {R"(host=db password='se\'cret-TAIL' dbname=idem)", "password=*** dbname=idem host=db"},
        // No user before the colon.
        {"postgresql://:PW@host/db", "password=*** dbname=db host=host"},
        // In the URI's query, percent-encoded.
        {"postgresql://db/idem?user=bob&password=p%40ss",
         "user=bob password=*** dbname=idem host=db"},
        {"host=db application_name='a b'", "host=db application_name='a b'"},
    };
    for (const auto& [dsn, shown] : cases) {
      ConnectionSettings s;
      s.dsn = dsn;
      QCOMPARE(s.redacted(), std::string(shown));
      for (const char* secret : {"s3cret", "cret-TAIL", "PW", "p@ss", "p%40ss"}) {
        QVERIFY2(s.redacted().find(secret) == std::string::npos, dsn);
      }
    }
    ConnectionSettings broken;
    broken.dsn = "host=db password='unterminated";
    QCOMPARE(broken.redacted(), std::string("(a connection string libpq cannot parse)"));
  }

  // The statement timeout is set per transaction (idem/bounded_transaction.hpp), never in
  // `options`, which PgBouncer refuses at connect.
  void effectiveDsnAddsConnectTimeoutButNoOptions() {
    ConnectionSettings s;
    s.dsn = "host=db";
    s.statementTimeout = 2000ms;
    s.applicationName = "idemwatch-test";
    const std::string dsn = s.effectiveDsn();
    QVERIFY2(dsn.find("connect_timeout='5'") != std::string::npos, dsn.c_str());
    QVERIFY2(dsn.find("options") == std::string::npos, dsn.c_str());
    QVERIFY2(dsn.find("statement_timeout") == std::string::npos, dsn.c_str());
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

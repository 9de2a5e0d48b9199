// Many databases, one figure. Shards and tenants each run their own database, and each
// database its own exporter (its counters are state). Here: two databases with different traffic,
// two idemwatch-exporter processes, one real Prometheus scraping both under one job with the
// shipped rules (dashboards/rules/*.rules.yml, unedited). Then:
// - the overall recording rules (job:*, source:*) equal what SQL counts across both databases:
//   numerators and denominators summed over the databases before dividing, which the traffic
//   makes differ from the mean of the two databases' own ratios;
// - the dashboards' per-instance panels, with $instance at All, show one series per database,
//   each equal to what SQL counts in that database.
//
// The counted traffic runs between two quiet moments, so that SQL can count exactly what the
// counters' increase holds: a warm-up creates every series and is fully scraped before
// Prometheus starts; the measured traffic is bounded; its end is scraped before the compared
// evaluation. The suite fails, never skips, when Prometheus is missing.
#include <QDir>
#include <QFileInfo>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkProxy>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>

#include "e2e_support.hpp"
#include "pg_cluster.hpp"
#include "simulator.hpp"
#include "test_database.hpp"

using namespace idem;
using namespace idem::e2e;
using namespace std::chrono_literals;

namespace {

const QString kJob = QStringLiteral("idemwatch");
const QStringList kRetrySourceLabels{"llm", "framework", "http", "callback"};
// The window of the compared rules; the whole measured traffic must lie inside it.
constexpr double kRuleWindowSeconds = 300;

// Each database's traffic: the first three times busier than the second, and far apart in every
// ratio, so that summing before dividing and averaging the databases' ratios give different
// figures (the test checks that they do, by three tolerances at least).
struct ShardTraffic {
  const char* name;
  double operationsPerSecond;
  double llmRetryRate;
  double httpRetryRate;
  double callbackRate;
  double doubleChargeRate;
};
constexpr std::array<ShardTraffic, 2> kShards{{
    {"a", 30, 0.30, 0.12, 0.07, 0.10},
    {"b", 10, 0.02, 0.02, 0.02, 0.01},
}};

// How long the measured traffic runs.
constexpr auto kMeasuredTraffic = 60s;

// Per database, the counters' increase over the measured traffic equals the SQL count exactly:
// every series exists from the first scrape, the first scrape holds all of the warm-up, the last
// holds all of the measured traffic (all three checked). What rate() adds is extrapolation: it
// stretches each series' increase from its first and last samples toward the window's edges, by
// up to half a scrape interval (0.5s) at the start and up to one interval (1s) at the end, the
// same factor f for every series of one exporter (they share their scrape timestamps).
// - Within one database f cancels in every ratio.
// - Across two, f_a and f_b differ by at most 1.5s over >= 60s of samples, 2.5%; a weighted
//   mean of two ratios whose weights shift by a factor 1 + d moves by at most d/4 * |r_a - r_b|,
//   here under 0.00625. 0.01 is above that bound, and at most a third of the gap between the
//   summed and the averaged retry ratio (checked below; 0.055 in a run on a loaded machine, where
//   the rules matched SQL within 0.0002).
// - A rate times the window is the count times f: within 2.5% + rounding; 4% allowed, where
//   counting only one database, or averaging them, is 25% or more off.
constexpr double kRatioTolerance = 0.01;
constexpr double kCountRelativeTolerance = 0.04;

// What SQL counts in one database: the rows behind the exporter's request and fund flow counters.
struct Counts {
  double requests = 0;
  double hits = 0;  // replayed, in_progress or retired: answered without calling downstream
  double retries = 0;
  std::map<QString, double> bySource;
  double fundFlows = 0;
  double duplicates = 0;

  Counts operator-(const Counts& o) const {
    Counts d;
    d.requests = requests - o.requests;
    d.hits = hits - o.hits;
    d.retries = retries - o.retries;
    for (const auto& [source, n] : bySource) {
      const auto it = o.bySource.find(source);
      d.bySource[source] = n - (it == o.bySource.end() ? 0 : it->second);
    }
    d.fundFlows = fundFlows - o.fundFlows;
    d.duplicates = duplicates - o.duplicates;
    return d;
  }
  Counts& operator+=(const Counts& o) {
    requests += o.requests;
    hits += o.hits;
    retries += o.retries;
    for (const auto& [source, n] : o.bySource) bySource[source] += n;
    fundFlows += o.fundFlows;
    duplicates += o.duplicates;
    return *this;
  }
};

constexpr const char* kCountRequests = R"(
SELECT count(*),
       count(*) FILTER (WHERE outcome IN ('replayed', 'in_progress', 'retired')),
       count(*) FILTER (WHERE trigger_source <> 'initial'),
       count(*) FILTER (WHERE trigger_source = 'llm'),
       count(*) FILTER (WHERE trigger_source = 'framework'),
       count(*) FILTER (WHERE trigger_source = 'http'),
       count(*) FILTER (WHERE trigger_source = 'callback')
  FROM idem.attempts)";
constexpr const char* kCountFundFlows = R"(
SELECT count(*), count(*) FILTER (WHERE duplicate_of IS NOT NULL) FROM idem.fund_flows)";

Counts countRows(const test::TestDatabase& db) {
  const auto conn = db.connect();
  pqxx::nontransaction tx(*conn);
  const pqxx::result r = tx.exec(kCountRequests);
  Counts c;
  c.requests = r[0][0].as<double>();
  c.hits = r[0][1].as<double>();
  c.retries = r[0][2].as<double>();
  for (int i = 0; i < kRetrySourceLabels.size(); ++i)
    c.bySource[kRetrySourceLabels[i]] = r[0][3 + i].as<double>();
  const pqxx::result f = tx.exec(kCountFundFlows);
  c.fundFlows = f[0][0].as<double>();
  c.duplicates = f[0][1].as<double>();
  return c;
}

// numerator / denominator, NaN without a denominator (as the rules give).
double share(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : std::nan("");
}

sim::SimulationConfig shardConfig(const test::TestDatabase& db, const ShardTraffic& shard,
                                  const std::string& runId) {
  sim::SimulationConfig c;
  c.connection.dsn = db.dsn();
  c.connection.source = "test";
  c.agents = 2;
  c.seed = 10;
  c.operationsPerSecond = shard.operationsPerSecond;
  c.runId = runId;
  c.llmRetryRate = shard.llmRetryRate;
  c.httpRetryRate = shard.httpRetryRate;
  c.callbackRate = shard.callbackRate;
  c.frameworkRetryRate = 0.01;
  c.doubleChargeRate = shard.doubleChargeRate;
  return c;
}

// The sum of a counter family's samples in an exposition (the exporter's /metrics).
double sumOfFamily(const QByteArray& exposition, const QByteArray& family) {
  double sum = 0;
  for (const QByteArray& line : exposition.split('\n')) {
    if (!line.startsWith(family + '{') && !line.startsWith(family + ' ')) continue;
    sum += line.mid(line.lastIndexOf(' ') + 1).toDouble();
  }
  return sum;
}

}  // namespace

class TestManyDatabases : public QObject {
  Q_OBJECT

  struct Shard {
    std::unique_ptr<test::TestDatabase> db;
    std::unique_ptr<ChildProcess> exporter;
    BackgroundTraffic traffic;
    int port = 0;
    Counts baseline;  // after the warm-up, all of it in Prometheus' first sample
    Counts measured;  // the measured traffic: what the counters' increase must hold
    QString instance() const { return QStringLiteral("127.0.0.1:%1").arg(port); }
  };

  SuiteEnvironment env_;
  QTemporaryDir workDir_;
  std::array<Shard, kShards.size()> shards_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::unique_ptr<PrometheusApi> api_;
  QNetworkAccessManager nam_;
  double scrapedSince_ = 0;  // when Prometheus had scraped every exporter once
  double evaluatedAt_ = 0;   // the compared evaluation of the 5m rules

  QString jobSel() const { return QStringLiteral("job=\"%1\"").arg(kJob); }

  // Runs `runId` traffic in every database for `duration` (at least `operations` per second of
  // it, bounded by count, for the warm-up), then waits until each exporter has counted all of it.
  // Empty on success.
  QString runTraffic(const std::string& runId, std::chrono::seconds duration, bool byCount) {
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      sim::SimulationConfig config = shardConfig(*shards_[i].db, kShards[i], runId);
      if (byCount) {
        config.operations =
            std::llround(kShards[i].operationsPerSecond * static_cast<double>(duration.count()));
      } else {
        config.operations = 0;
        config.duration = duration;
      }
      if (const auto problems = config.validate(); !problems.empty())
        return QString::fromStdString(problems.front());
      shards_[i].traffic.start(config);
    }
    for (Shard& s : shards_) {
      s.traffic.join();
      if (QString p = s.traffic.problem(true); !p.isEmpty()) return p;
    }
    for (Shard& s : shards_) {
      const Counts sql = countRows(*s.db);
      const QUrl url(QStringLiteral("http://%1/metrics").arg(s.instance()));
      double requests = -1;
      double flows = -1;
      const bool caughtUp = QTest::qWaitFor(
          [&] {
            const QByteArray body = httpRequest(nam_, url, std::nullopt, 2s).body;
            requests = sumOfFamily(body, "idempotency_requests_total");
            flows = sumOfFamily(body, "idempotency_fund_flows_total");
            return requests == sql.requests && flows == sql.fundFlows;
          },
          30'000);
      if (!caughtUp) {
        return QStringLiteral(
                   "%1: the exporter counts %2 requests and %3 fund flows, SQL %4 and "
                   "%5, 30s after the traffic ended; ")
                   .arg(s.instance())
                   .arg(requests)
                   .arg(flows)
                   .arg(sql.requests)
                   .arg(sql.fundFlows) +
               s.exporter->describe();
      }
    }
    return {};
  }

  // The value of `expr` per instance at `at`.
  std::map<QString, double> byInstance(const QString& expr, double at) {
    std::map<QString, double> out;
    for (const Sample& s : api_->query(expr, at).samples)
      out[s.metric.value("instance").toString()] = s.value;
    return out;
  }

 public:
  TestManyDatabases() { nam_.setProxy(QNetworkProxy::NoProxy); }
  ~TestManyDatabases() override {
    for (Shard& s : shards_) s.traffic.stop();
    prometheus_.reset();
  }

 private slots:
  void initTestCase() {
    const QString missing = findSuiteEnvironment(env_);
    QVERIFY2(missing.isEmpty(), qPrintable(missing));
    QVERIFY2(workDir_.isValid(), qPrintable(workDir_.errorString()));

    QStringList targets;
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      Shard& s = shards_[i];
      const QString name = QStringLiteral("tst_many_databases_%1").arg(kShards[i].name);
      s.db = std::make_unique<test::TestDatabase>(name.toStdString());
      s.port = test::freePort();
      s.exporter = std::make_unique<ChildProcess>("idemwatch-exporter " + name,
                                                  workDir_.filePath(name + ".log"));
      const QString error =
          startExporter(*s.exporter, env_.binaryDir, s.db->dsn(), s.instance(), {}, nam_);
      QVERIFY2(error.isEmpty(), qPrintable(error));
      targets << s.instance();
    }

    // The warm-up: every biz type's series exist before the first scrape (the exporter creates
    // a biz type's series with its first row; rate() cannot see a series' first increment).
    QString error = runTraffic("warm-up", 4s, true);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    for (Shard& s : shards_) s.baseline = countRows(*s.db);

    const QString config = workDir_.filePath("prometheus.yml");
    error = writePrometheusConfig(config, env_.sourceDir, kJob, targets);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    const int port = test::freePort();
    prometheus_ = std::make_unique<ChildProcess>("prometheus", workDir_.filePath("prometheus.log"));
    api_ = std::make_unique<PrometheusApi>(port);
    error = startPrometheus(*prometheus_, *api_, env_.prometheus, config, workDir_.path(), port,
                            kJob, static_cast<int>(shards_.size()), scrapedSince_);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    const QString seriesCount =
        "count by (instance) ({__name__=~\"idempotency_(requests|fund_flows)_total\"," + jobSel() +
        "})";
    const std::map<QString, double> seriesAtStart = byInstance(seriesCount, nowSeconds());

    const double trafficFrom = nowSeconds();
    error = runTraffic("measured", kMeasuredTraffic, false);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    for (Shard& s : shards_) s.measured = countRows(*s.db) - s.baseline;

    // Prometheus holds the end of the traffic, and the 5m rules evaluated after that.
    const QString total = "sum by (instance) (idempotency_requests_total{" + jobSel() + "})";
    const bool scrapedEnd = QTest::qWaitFor(
        [&] {
          const std::map<QString, double> now = byInstance(total, nowSeconds());
          for (const Shard& s : shards_) {
            const auto it = now.find(s.instance());
            if (it == now.end() || it->second != s.baseline.requests + s.measured.requests)
              return false;
          }
          return true;
        },
        30'000);
    QVERIFY2(scrapedEnd, "Prometheus did not scrape the end of the traffic within 30s");
    const double scrapedEndAt = nowSeconds();
    const QString rule = "job:idempotency_hit_ratio:rate5m{" + jobSel() + "}";
    const bool evaluated = QTest::qWaitFor(
        [&] {
          evaluatedAt_ = api_->single("timestamp(" + rule + ")").value_or(0);
          return evaluatedAt_ >= scrapedEndAt;
        },
        60'000);
    QVERIFY2(evaluated, qPrintable("no evaluation of " + rule + " within 60s"));
    qInfo("measured traffic %.1fs, compared evaluation %.1fs after the first scrape",
          scrapedEndAt - trafficFrom, evaluatedAt_ - scrapedSince_);
    QVERIFY2(evaluatedAt_ - scrapedSince_ < kRuleWindowSeconds - 10,
             "the compared evaluation's 5m window no longer holds the first scrape");

    // The premises of the tolerance: the first scrape held the whole warm-up, and no series was
    // born during the measured traffic.
    const std::map<QString, double> atFirstScrape = byInstance(total, scrapedSince_);
    const std::map<QString, double> seriesAtEnd = byInstance(seriesCount, evaluatedAt_);
    for (const Shard& s : shards_) {
      const auto first = atFirstScrape.find(s.instance());
      QVERIFY2(first != atFirstScrape.end() && first->second == s.baseline.requests,
               qPrintable(s.instance() + ": the first scrape does not hold the whole warm-up"));
      QVERIFY2(seriesAtStart.count(s.instance()) == 1 && seriesAtEnd.count(s.instance()) == 1 &&
                   seriesAtStart.at(s.instance()) == seriesAtEnd.at(s.instance()),
               qPrintable(s.instance() + ": series were born during the measured traffic"));
    }
  }

  void cleanupTestCase() {
    for (Shard& s : shards_) s.traffic.stop();
    prometheus_.reset();
    for (Shard& s : shards_) s.exporter.reset();
  }

  void overallRecordingRulesEqualSqlAcrossBothDatabases() {
    Counts all;
    for (const Shard& s : shards_) all += s.measured;
    const Counts& a = shards_[0].measured;
    const Counts& b = shards_[1].measured;

    struct Figure {
      QString recorded;
      double sql;           // summed over both databases, then divided
      double meanOfRatios;  // the wrong figure: the mean of the two databases' ratios
    };
    const auto mean = [](double x, double y) { return (x + y) / 2; };
    std::vector<Figure> figures{
        {"job:idempotency_hit_ratio:rate5m", share(all.hits, all.requests),
         mean(share(a.hits, a.requests), share(b.hits, b.requests))},
        {"job:idempotency_retry_trigger_ratio:rate5m", share(all.retries, all.requests),
         mean(share(a.retries, a.requests), share(b.retries, b.requests))},
        {"job:idempotency_duplicate_fund_flow_ratio:rate5m", share(all.duplicates, all.fundFlows),
         mean(share(a.duplicates, a.fundFlows), share(b.duplicates, b.fundFlows))},
    };
    for (const QString& source : kRetrySourceLabels) {
      figures.push_back({"source:idempotency_retry_trigger_ratio:rate5m{source=\"" + source + "\"}",
                         share(all.bySource.at(source), all.requests),
                         mean(share(a.bySource.at(source), a.requests),
                              share(b.bySource.at(source), b.requests))});
    }

    QStringList failures;
    for (const Figure& f : figures) {
      const QString expr = f.recorded.contains('{')
                               ? QString(f.recorded).replace("{", "{" + jobSel() + ",")
                               : f.recorded + "{" + jobSel() + "}";
      const std::optional<double> recorded = api_->single(expr, evaluatedAt_);
      QVERIFY2(recorded, qPrintable("expected one series of " + expr));
      const QString line = QStringLiteral("%1: recorded %2, SQL across both %3, mean of ratios %4")
                               .arg(f.recorded)
                               .arg(*recorded, 0, 'f', 5)
                               .arg(f.sql, 0, 'f', 5)
                               .arg(f.meanOfRatios, 0, 'f', 5);
      qInfo().noquote() << line;
      if (!(std::abs(*recorded - f.sql) <= kRatioTolerance)) failures << line;
    }
    // The traffic tells the right figure from the wrong one: a rule giving the mean of ratios
    // would miss SQL by this gap, three tolerances at least.
    QVERIFY2(std::abs(figures[1].sql - figures[1].meanOfRatios) >= 3 * kRatioTolerance,
             "the two databases' retry ratios are too close to tell summing from averaging");

    // Rates times the window: the counts of both databases together.
    const std::vector<std::pair<QString, double>> counts{
        {"job:idempotency_requests:rate5m", all.requests},
        {"job:idempotency_fund_flows:rate5m", all.fundFlows},
        {"job:idempotency_requests_retry:rate5m", all.retries},
    };
    for (const auto& [name, sql] : counts) {
      const std::optional<double> rate = api_->single(name + "{" + jobSel() + "}", evaluatedAt_);
      QVERIFY2(rate, qPrintable("expected one series of " + name));
      const double counted = *rate * kRuleWindowSeconds;
      const QString line = QStringLiteral("%1 x %2s: %3, SQL across both %4")
                               .arg(name)
                               .arg(kRuleWindowSeconds)
                               .arg(counted, 0, 'f', 1)
                               .arg(sql);
      qInfo().noquote() << line;
      if (!(std::abs(counted - sql) <= kCountRelativeTolerance * sql)) failures << line;
    }
    QVERIFY2(failures.isEmpty(), qPrintable("beyond the tolerance:\n" + failures.join('\n')));
  }

  // With $instance at All (Grafana's ".*"), the overview's per-instance panels show each
  // database, each equal to what SQL counts in it.
  void perInstancePanelsShowEachDatabase() {
    QProcess lint;
    lint.start(env_.binaryDir + "/dashboards/idemwatch-dashboard-lint",
               {"--print-exprs", "--with-source", "--set", "job=" + kJob, "--set", "instance=.*",
                "--set", "__rate_interval=5m",
                env_.sourceDir + "/dashboards/grafana/dashboards/idemwatch-overview.json"});
    QVERIFY2(lint.waitForFinished(30'000), "the linter did not finish within 30s");
    QCOMPARE(lint.exitCode(), 0);

    // Per panel title, what SQL says of each database (panels without an entry: series only).
    const auto perShard = [&](auto figure) {
      std::map<QString, double> m;
      for (const Shard& s : shards_) m[s.instance()] = figure(s.measured);
      return m;
    };
    const std::map<QString, std::map<QString, double>> expected{
        {"Hit ratio by instance",
         perShard([](const Counts& c) { return share(c.hits, c.requests); })},
        {"Duplicate fund flow ratio by instance",
         perShard([](const Counts& c) { return share(c.duplicates, c.fundFlows); })},
    };

    QStringList failures;
    QSet<QString> panels;
    for (const QString& line :
         QString::fromUtf8(lint.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
      const QStringList parts = line.split('\t');
      QVERIFY2(parts.size() >= 4, qPrintable("unexpected linter line: " + line));
      const QString& title = parts[1];
      if (!title.endsWith(QLatin1String("by instance"))) continue;
      panels.insert(title);
      const QString expr = parts.mid(3).join('\t');
      const std::map<QString, double> values = byInstance(expr, evaluatedAt_);
      for (const Shard& s : shards_) {
        const auto it = values.find(s.instance());
        if (it == values.end() || !std::isfinite(it->second)) {
          failures << title + ": no number for " + s.instance() + " (" + expr + ")";
          continue;
        }
        if (const auto e = expected.find(title); e != expected.end()) {
          const double sql = e->second.at(s.instance());
          if (!(std::abs(it->second - sql) <= kRatioTolerance)) {
            failures << QStringLiteral("%1, %2: %3, SQL in that database %4")
                            .arg(title, s.instance())
                            .arg(it->second, 0, 'f', 5)
                            .arg(sql, 0, 'f', 5);
          }
        }
      }
    }
    for (const auto& [title, unused] : expected) {
      if (!panels.contains(title)) failures << "no panel \"" + title + "\" in the overview";
    }
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
  }
};

QTEST_GUILESS_MAIN(TestManyDatabases)
#include "tst_many_databases.moc"

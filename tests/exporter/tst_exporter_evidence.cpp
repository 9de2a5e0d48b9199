// The gateway's evidence as the exporter publishes it (docs/contract/metrics.md, "The gateway's
// evidence"): statement lines counted once each by what matching found, however many files repeat
// them and however many importers run at once; the end of each gateway's newest final period; the
// UNKNOWN records still waiting by age; and who decided each UNKNOWN record. Before the migration
// that brings the evidence, the collector fails through the exporter's health and answers once it
// is applied.
#include <QtTest>
#include <future>
#include <pqxx/pqxx>

#include "exporter_harness.hpp"
#include "idem/migrations.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;
using namespace idem::test;

namespace {

std::string linesKey(const std::string& gateway, const std::string& result) {
  return "idempotency_statement_lines_total{gateway=\"" + gateway + "\",result=\"" + result + "\"}";
}
std::string resolvedKey(const std::string& by) {
  return "idempotency_unknown_resolved_total{by=\"" + by + "\"}";
}

// One statement file through the importer's three calls, as the gateway's side sends it: lines
// as "line_id:kind:amount:key" (kind empty for a fee), ":pending" after it for a line not booked
// yet.
void importFile(pqxx::connection& c, const std::string& gateway, const std::string& sha,
                const std::vector<std::string>& lines, const std::string& finalPeriod = {}) {
  std::string json = "[";
  long long n = 1;
  for (const std::string& l : lines) {
    const QStringList f = QString::fromStdString(l).split(':');
    if (json.size() > 1) json += ",";
    json += "{\"line_id\":\"" + f[0].toStdString() + "\",\"source_line\":" + std::to_string(++n) +
            ",\"category\":\"x\"" +
            (f[1].isEmpty() ? "" : ",\"flow_kind\":\"" + f[1].toStdString() + "\"") +
            ",\"amount_minor\":" + f[2].toStdString() + ",\"currency\":\"CNY\"" +
            (f[3].isEmpty() ? "" : ",\"idempotency_key\":\"" + f[3].toStdString() + "\"") +
            ",\"gateway_ref\":\"ref-" + f[0].toStdString() + "\",\"booked\":" +
            (f.size() > 4 && f[4] == QStringLiteral("pending") ? "false" : "true") +
            ",\"fields\":{}}";
  }
  json += "]";
  pqxx::work tx(c);
  const pqxx::row o = tx.exec_params1(
      "SELECT statement_id, already_imported FROM idem.open_statement($1, 'stripe', 'f', $2)",
      gateway, sha);
  if (o[1].as<bool>()) return;
  tx.exec_params("SELECT idem.add_statement_lines($1, $2::jsonb)", o[0].as<long long>(), json);
  const std::string from = finalPeriod.empty() ? "" : finalPeriod.substr(0, finalPeriod.find('/'));
  const std::string to = finalPeriod.empty() ? "" : finalPeriod.substr(finalPeriod.find('/') + 1);
  tx.exec_params(
      "SELECT * FROM idem.close_statement($1, $2, nullif($3, '')::timestamptz, "
      "nullif($4, '')::timestamptz, $5)",
      o[0].as<long long>(), static_cast<long long>(lines.size()), from, to, !finalPeriod.empty());
  tx.commit();
}

std::string sha(int n) {
  return QByteArray::number(n).rightJustified(64, '0').toStdString();
}

}  // namespace

class TestExporterEvidence : public QObject {
  Q_OBJECT
  std::unique_ptr<TestDatabase> db_;

  double scalar(const std::string& sql) { return static_cast<double>(db_->scalar(sql)); }

  // A payment claimed, its answer lost: UNKNOWN at version 2; its claim token returned.
  std::string lostAnswer(ProtocolClient& client, const std::string& key) {
    BeginRequest r = payRequest(key, "o-" + key);
    r.requestPayload = R"({"amount_minor": 100, "currency": "CNY"})";
    const BeginResult b = client.begin(r);
    if (!b.claimToken || !client.markUnknown(key, 1, "gateway timeout", *b.claimToken).ok())
      qFatal("%s was not left UNKNOWN", key.c_str());
    return *b.claimToken;
  }

 private slots:
  void init() { db_ = std::make_unique<TestDatabase>("tst_exporter_evidence"); }
  void cleanup() { db_.reset(); }

  void eachDeciderAndEachLineIsCountedOnce() {
    auto c = db_->connect();
    ProtocolClient client(*c);
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));

    for (const char* k : {"by-line", "by-callback", "by-person", "by-ledger", "mismatch", "left"})
      lostAnswer(client, k);
    const std::string token = lostAnswer(client, "by-claimant");
    // The claimant's late answer, a person, the ledger under the key, a callback, a line.
    QVERIFY(client.complete("by-claimant", 2, "{}", token).ok());
    db_->exec(
        "SELECT idem.settle('by-person', 2, 'SUCCESS', 'the gateway''s dashboard shows "
        "it', NULL, false)");
    db_->exec(
        "SELECT idem.record_fund_flow('payment', 'o-by-ledger', 'DEBIT', 100, 'CNY', "
        "'gw-ledger', 'by-ledger'); SELECT idem.reconcile()");
    db_->exec(
        "SELECT idem.ingest_callback('stripe', 'evt-1', 'DEBIT', 100, 'CNY', 'ch-cb', "
        "'by-callback', NULL, '{}')");
    importFile(*c, "stripe", sha(1),
               {"l1:DEBIT:100:by-line", "l2:DEBIT:999:mismatch", "l3:DEBIT:5:", "l4::3:"},
               "2026-11-30T00:00:00Z/2026-12-01T00:00:00Z");
    // The same file again, and one repeating two lines: nothing counted twice.
    importFile(*c, "stripe", sha(1), {"l1:DEBIT:100:by-line"});
    importFile(*c, "stripe", sha(2), {"l3:DEBIT:5:", "l4::3:", "l5::7:"});

    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), linesKey("stripe", "not_a_flow")) == std::optional(2.0); }));
    const Series s = e.scrape();
    QCOMPARE(value(s, linesKey("stripe", "matched")), std::optional(1.0));
    QCOMPARE(value(s, linesKey("stripe", "mismatched")), std::optional(1.0));
    QCOMPARE(value(s, linesKey("stripe", "unmatched")), std::optional(1.0));
    QCOMPARE(value(s, linesKey("stripe", "duplicate")), std::optional(0.0));
    for (const char* by : {"claimant", "operator", "ledger", "callback", "statement"})
      QVERIFY2(value(s, resolvedKey(by)) == std::optional(1.0), by);
    QCOMPARE(value(s, resolvedKey("lookup")), std::optional(0.0));
    QCOMPARE(value(s, resolvedKey("statement_absence")), std::optional(0.0));
    QCOMPARE(value(s, "idempotency_statement_last_final_period_end_seconds{gateway=\"stripe\"}"),
             std::optional(scalar("SELECT extract(epoch FROM timestamptz "
                                  "'2026-12-01T00:00:00Z')::bigint")));
    // The records still waiting: the mismatch and the one nothing spoke of.
    QCOMPARE(value(s, "idempotency_unknown_records{older_than=\"0s\"}"),
             std::optional(scalar("SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'")));
    QCOMPARE(value(s, "idempotency_unknown_records{older_than=\"0s\"}"), std::optional(2.0));
    QCOMPARE(value(s, "idempotency_unknown_records{older_than=\"1h\"}"), std::optional(0.0));
  }

  // A line first read as pending counts again, under what its booking found, when a later file
  // books it: money no record explains pages whether it arrived booked or was booked later.
  void aPendingLineCountsAgainWhenBooked() {
    auto c = db_->connect();
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    importFile(*c, "stripe", sha(11), {"p1:DEBIT:500::pending", "p2:DEBIT:700::pending"});
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), linesKey("stripe", "pending")) == std::optional(2.0); }));
    QCOMPARE(value(e.scrape(), linesKey("stripe", "unmatched")), std::optional(0.0));
    importFile(*c, "stripe", sha(12), {"p1:DEBIT:500:"});
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), linesKey("stripe", "unmatched")) == std::optional(1.0); }));
    // Booked once, counted once: a third file repeating the booked line changes nothing.
    importFile(*c, "stripe", sha(13), {"p1:DEBIT:500:", "p2:DEBIT:700::pending"});
    QVERIFY(e.waitForCollections(2));
    const Series s = e.scrape();
    QCOMPARE(value(s, linesKey("stripe", "unmatched")), std::optional(1.0));
    QCOMPARE(value(s, linesKey("stripe", "pending")), std::optional(2.0));
    QCOMPARE(scalar("SELECT count(*) FROM idem.statement_line_bookings"), 1.0);
  }

  // Importers racing each other with overlapping files while the exporter collects: the counters
  // end equal to the lines the table holds, none twice, none missed.
  void concurrentImportsAreCountedExactlyOnce() {
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(1));
    std::vector<std::future<void>> importers;
    for (int t = 0; t < 4; ++t) {
      importers.push_back(std::async(std::launch::async, [this, t] {
        auto c = db_->connect();
        for (int f = 0; f < 5; ++f) {
          std::vector<std::string> lines;
          // Each file shares half its lines with the next importer's file of the same round.
          for (int i = 0; i < 100; ++i)
            lines.push_back("r" + std::to_string(f) + "-" + std::to_string((t * 50 + i) % 200) +
                            "::1:");
          for (int attempt = 0;; ++attempt) {
            try {
              importFile(*c, "bank", sha(1000 + t * 10 + f), lines);
              break;
            } catch (const pqxx::transaction_rollback&) {
              // Two importers inserting the same new line ids in opposite orders may deadlock, or
              // one may commit a line the other looked up as new (40001): the loser rolls back
              // whole and sends its file again.
              if (attempt > 5) throw;
            }
          }
        }
      }));
    }
    for (auto& f : importers) f.get();
    const double held = scalar("SELECT count(*) FROM idem.statement_lines WHERE gateway = 'bank'");
    QCOMPARE(held, 5.0 * 200);
    QVERIFY(waitUntil(
        [&] { return value(e.scrape(), linesKey("bank", "not_a_flow")) == std::optional(held); }));
    QVERIFY(e.waitForCollections(2));
    QCOMPARE(value(e.scrape(), linesKey("bank", "not_a_flow")), std::optional(held));
  }

  void beforeTheEvidenceMigrationTheCollectorFailsThenAnswers() {
    db_ = std::make_unique<TestDatabase>("tst_exporter_evidence_old", /*migrate=*/false);
    {
      auto c = db_->connect();
      MigrateOptions upTo14;
      upTo14.upTo = 14;
      migrate(*c, bundledMigrations(), upTo14);
    }
    RunningExporter e(testOptions(db_->dsn()));
    QVERIFY(e.waitForCollections(2));
    Series s = e.scrape();
    QVERIFY(value(s, "idempotency_exporter_collect_errors_total{stage=\"gateway_evidence\"}") >=
            std::optional(1.0));
    QCOMPARE(value(s, "idempotency_exporter_collector_success{collector=\"gateway_evidence\"}"),
             std::optional(0.0));
    QCOMPARE(value(s, "idempotency_exporter_db_up"), std::optional(1.0));
    {
      auto c = db_->connect();
      migrate(*c, bundledMigrations());
      importFile(*c, "stripe", sha(7), {"x1::1:"});
    }
    QVERIFY(waitUntil([&] {
      return value(e.scrape(),
                   "idempotency_exporter_collector_success{collector=\"gateway_"
                   "evidence\"}") == std::optional(1.0);
    }));
    QVERIFY(
        waitUntil([&] { return value(e.scrape(), linesKey("stripe", "not_a_flow")).has_value(); }));
  }
};

QTEST_GUILESS_MAIN(TestExporterEvidence)
#include "tst_exporter_evidence.moc"

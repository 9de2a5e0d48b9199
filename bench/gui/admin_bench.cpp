// The admin app on 10M records: how long the operator waits for the first page, for the next page
// deep in the table, for an exact-key search and a biz_id prefix search, and how long the GUI
// thread was ever blocked meanwhile. It drives the real DatabaseSession (worker thread),
// RecordTableModel and RecordTableView, and times from the call (setFilter, fetchMore) until the
// rows are in the model. Targets: first page and searches under 100 ms, no GUI stall
// over 50 ms. Results: docs/bench/gui.md.
//
//   idemwatch-admin-bench --db.dsn "host=... port=... user=postgres" [--rows=10000000] [--runs=7]
//
// The first run loads the rows (a few minutes) into database idemwatch_bench_gui; later runs reuse
// them unless --reload.
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QTimer>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <pqxx/pqxx>
#include <thread>

#include "bulk_records.hpp"
#include "event_loop_stall.hpp"
#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/migrations.hpp"
#include "models/database_session.hpp"
#include "models/record_page_query.hpp"
#include "models/record_table_model.hpp"
#include "models/timestamps.hpp"
#include "widgets/record_table_view.hpp"

using namespace idem;
using namespace idem::admin;

namespace {

struct Sample {
  double totalMs = 0;     // call to rows in the model, as the operator waits
  double databaseMs = 0;  // of which the worker's statement(s)
  int rows = 0;
};

struct Figure {
  std::string name;
  std::vector<Sample> samples;
  double stallMs = 0;
  double busyMs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string firstLine(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return line.substr(line.find(':') + 1);
  }
  return "?";
}

// Waits (running the event loop) for the model's next answer; the wall time and its database part.
Sample waitForAnswer(RecordTableModel& model, const std::function<void()>& ask) {
  Sample s;
  QEventLoop loop;
  bool failed = false;
  auto a = QObject::connect(&model, &RecordTableModel::fetched, &loop, [&](const RecordPage& page) {
    s.databaseMs = static_cast<double>(page.databaseTime.count()) / 1000.0;
    s.rows = static_cast<int>(page.records.size());
    loop.quit();
  });
  auto b =
      QObject::connect(&model, &RecordTableModel::fetchFailed, &loop, [&](const QString& message) {
        std::cerr << "fetch failed: " << message.toStdString() << "\n";
        failed = true;
        loop.quit();
      });
  QTimer::singleShot(60'000, &loop, [&] {
    std::cerr << "no answer within 60 s\n";
    failed = true;
    loop.quit();
  });
  QElapsedTimer clock;
  clock.start();
  ask();
  loop.exec();
  s.totalMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
  QObject::disconnect(a);
  QObject::disconnect(b);
  if (failed) std::exit(1);
  // Let the view lay out and paint the rows before the next measurement (the stall meter sees it).
  QElapsedTimer settle;
  settle.start();
  while (settle.elapsed() < 30) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
  return s;
}

void explain(pqxx::connection& c, const std::string& name, const BoundQuery& q) {
  pqxx::nontransaction tx(c);
  const auto plan = tx.exec_params("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY ON) " + q.sql,
                                   pqxx::prepare::make_dynamic_params(q.params));
  std::cout << "\n-- " << name << "\n";
  for (const auto& row : plan) std::cout << "   " << row[0].c_str() << "\n";
}

}  // namespace

int main(int argc, char* argv[]) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  std::string serverDsn, database = "idemwatch_bench_gui";
  std::int64_t rows = 10'000'000;
  int runs = 7, pageSize = 200;
  bool reload = false, explainQueries = false;
  CommandLine cli("idemwatch-admin-bench", "idemwatch-admin-bench --db.dsn DSN [flags]");
  cli.text("db.dsn", "DSN", "a superuser DSN of the cluster (its maintenance database)", serverDsn);
  cli.text("database", "NAME", "database to load and measure", database);
  cli.integer("rows", "N", "records to load", rows, 1000, 1'000'000'000);
  cli.integer("runs", "N", "measurements per figure; the median counts", runs, 1, 100);
  cli.integer("page-size", "N", "rows per page (the app's default)", pageSize, 10, 5000);
  cli.flag("reload", "reload the rows even if the database has them", reload);
  cli.flag("explain", "print EXPLAIN ANALYZE of each query", explainQueries);
  return guardedMain("idemwatch-admin-bench", [&] {
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;

    QApplication app(argc, argv);
    const std::string dsn = serverDsn + " dbname=" + database;
    {
      pqxx::connection server(serverDsn);
      pqxx::nontransaction tx(server);
      if (tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", database).empty()) {
        tx.exec("CREATE DATABASE " + tx.quote_name(database));
      }
    }
    pqxx::connection owner(dsn);
    migrate(owner, bundledMigrations());
    if (reload || bench::loadedRows(owner) != rows) {
      std::cerr << "loading " << rows << " records into " << database << "\n";
      bench::loadRecords(owner, {rows, 30});
    }

    // Sample values: a key and a biz id from the middle, the depth of the middle of the table.
    pqxx::nontransaction tx(owner);
    const std::int64_t middle = rows / 2;
    const std::string key = tx.exec_params1("SELECT 'key-' || md5($1::text)", middle)[0].c_str();
    std::string narrow = "ord-" + std::to_string(middle + 100'000'000).substr(1, 7);  // 10 numbers
    std::string broad = narrow.substr(0, narrow.size() - 2);  // 1,000 numbers
    const auto midUpdated =
        tx.exec_params1(
              "SELECT (extract(epoch FROM updated_at) * 1000000)::bigint FROM idem.records "
              "ORDER BY updated_at DESC, idempotency_key DESC OFFSET $1 LIMIT 1",
              middle)[0]
            .as<long long>();
    const Timestamp deep{std::chrono::microseconds(midUpdated)};

    DatabaseSession session;
    session.open(DatabaseSession::withAdminDefaults(ConnectionSettings::resolve(dsn)));
    RecordTableModel model(&session);
    model.setPageSize(pageSize);
    RecordTableView view;
    view.setRecordModel(&model);
    view.resize(1400, 900);
    view.show();
    QEventLoop wait;
    QObject::connect(&session, &DatabaseSession::connected, &wait, &QEventLoop::quit);
    QTimer::singleShot(30'000, &wait, &QEventLoop::quit);
    wait.exec();
    if (!session.isConnected()) {
      std::cerr << "cannot connect: " << session.lastError().toStdString() << "\n";
      return 1;
    }

    double loadBefore[3] = {0, 0, 0};
    getloadavg(loadBefore, 3);
    bench::EventLoopStall stall;
    stall.start();
    double longestStall = 0;
    double longestBusy = 0;
    int over50 = 0;
    std::vector<Figure> figures;
    const auto measure = [&](const std::string& name, const std::function<Sample()>& once) {
      Figure f{name, {}, 0, 0};
      stall.reset();
      once();  // warm-up, not counted: the first use of a plan or a cold page
      for (int i = 0; i < runs; ++i) f.samples.push_back(once());
      f.stallMs = stall.longestMs();
      f.busyMs = stall.longestBusyMs();
      longestStall = std::max(longestStall, stall.longestMs());
      longestBusy = std::max(longestBusy, stall.longestBusyMs());
      over50 += stall.over50Ms();
      figures.push_back(f);
      std::cerr << "  " << name << " done\n";
    };
    const auto firstPage = [&](const RecordFilter& filter) {
      return [&model, filter] {
        // A different filter first, so setFilter really starts over.
        return waitForAnswer(model, [&] { model.setFilter(filter); });
      };
    };

    RecordFilter all;
    measure("first page (all records, updated desc)", firstPage(all));
    RecordFilter created = all;
    created.order = RecordOrder::CreatedDesc;
    measure("first page (all records, created desc)", firstPage(created));
    RecordFilter deepFilter;
    deepFilter.to = deep;
    measure("next page 5M rows deep (fetchMore)", [&] {
      waitForAnswer(model, [&] { model.setFilter(deepFilter); });
      return waitForAnswer(model, [&] { model.fetchMore({}); });
    });
    measure("next page after 50 pages of scrolling", [&] {
      waitForAnswer(model, [&] { model.setFilter(all); });
      for (int i = 0; i < 49; ++i) waitForAnswer(model, [&] { model.fetchMore({}); });
      return waitForAnswer(model, [&] { model.fetchMore({}); });
    });
    RecordFilter byKey;
    byKey.key = key;
    measure("exact key search", firstPage(byKey));
    RecordFilter byPrefix;
    byPrefix.bizIdPrefix = narrow;
    measure("biz_id prefix '" + narrow + "' (a few matches)", firstPage(byPrefix));
    byPrefix.bizIdPrefix = broad;
    measure("biz_id prefix '" + broad + "' (hundreds of matches)", firstPage(byPrefix));
    RecordFilter byCommonPrefix;
    byCommonPrefix.bizIdPrefix = "ord-";
    measure("biz_id prefix 'ord-' (millions of matches)", firstPage(byCommonPrefix));
    RecordFilter unknown;
    unknown.statuses = {RecordStatus::Unknown};
    measure("status UNKNOWN", firstPage(unknown));
    measure("needs attention (stuck, oldest first)", firstPage(RecordFilter::attention()));
    RecordFilter refunds;
    refunds.bizType = "refund";
    refunds.statuses = {RecordStatus::Failed};
    measure("biz_type refund + status FAILED (0.9% of rows)", firstPage(refunds));
    RecordFilter lastHour;
    lastHour.within = std::chrono::hours(1);
    lastHour.order = RecordOrder::CreatedAsc;
    measure("created in the last hour, oldest first", firstPage(lastHour));
    measure("refresh of 2,000 loaded rows in place", [&] {
      waitForAnswer(model, [&] { model.setFilter(all); });
      for (int i = 0; i < 2000 / pageSize - 1; ++i)
        waitForAnswer(model, [&] { model.fetchMore({}); });
      return waitForAnswer(model, [&] { model.refresh(); });
    });
    RecordFilter noSuchType;
    noSuchType.bizType = "no-such-type";
    measure("biz_type that matches nothing (worst case: every row read)",
            [&] { return waitForAnswer(model, [&] { model.setFilter(noSuchType); }); });

    // The machine and the server, for the record.
    const auto settings = tx.exec(
        "SELECT current_setting('server_version'), current_setting('shared_buffers'), "
        "current_setting('work_mem'), pg_size_pretty(pg_total_relation_size('idem.records'))")[0];
    std::cout << "\nidemwatch-admin-bench: " << rows << " records, page size " << pageSize << ", "
              << runs << " runs per figure (median; max), after one warm-up\n";
    std::cout << "machine: " << std::thread::hardware_concurrency() << " CPUs,"
              << firstLine("/proc/cpuinfo", "model name") << ","
              << firstLine("/proc/meminfo", "MemTotal") << " RAM\n";
    std::cout << "server: PostgreSQL " << settings[0].c_str() << ", shared_buffers "
              << settings[1].c_str() << ", work_mem " << settings[2].c_str()
              << "; idem.records with indexes: " << settings[3].c_str() << "\n\n";
    std::printf("| %-58s | %10s | %8s | %11s | %5s | %12s | %11s |\n", "figure", "median ms",
                "max ms", "db median", "rows", "GUI stall ms", "GUI busy ms");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(60, '-').c_str(),
                std::string(12, '-').c_str(), std::string(10, '-').c_str(),
                std::string(13, '-').c_str(), std::string(7, '-').c_str(),
                std::string(14, '-').c_str(), std::string(13, '-').c_str());
    for (const Figure& f : figures) {
      std::vector<double> total;
      std::vector<double> db;
      double worst = 0;
      for (const Sample& s : f.samples) {
        total.push_back(s.totalMs);
        db.push_back(s.databaseMs);
        worst = std::max(worst, s.totalMs);
      }
      std::printf("| %-58s | %10.1f | %8.1f | %11.1f | %5d | %12.1f | %11.1f |\n", f.name.c_str(),
                  median(total), worst, median(db), f.samples.back().rows, f.stallMs, f.busyMs);
    }
    std::printf(
        "\nlongest GUI-thread stall over all figures: %.1f ms wall (%d over 50 ms); longest "
        "GUI-thread "
        "CPU burst between two ticks: %.1f ms\n",
        longestStall, over50, longestBusy);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) == 3) {
      std::printf("load average (1/5/15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f\n",
                  loadBefore[0], loadBefore[1], loadBefore[2], load[0], load[1], load[2]);
    }

    if (explainQueries) {
      pqxx::connection c(dsn);
      explain(c, "first page", pageQuery(all, std::nullopt, pageSize + 1));
      explain(c, "deep next page", pageQuery(deepFilter, RecordCursor{deep, "key-"}, pageSize + 1));
      explain(c, "exact key", pageQuery(byKey, std::nullopt, pageSize + 1));
      RecordFilter narrowFilter;
      narrowFilter.bizIdPrefix = narrow;
      explain(c, "biz_id prefix (narrow)", pageQuery(narrowFilter, std::nullopt, pageSize + 1));
      explain(c, "biz_id prefix (broad)", pageQuery(byPrefix, std::nullopt, pageSize + 1));
      explain(c, "needs attention",
              pageQuery(RecordFilter::attention(), std::nullopt, pageSize + 1));
      explain(c, "refund + FAILED", pageQuery(refunds, std::nullopt, pageSize + 1));
      explain(c, "biz_type matching nothing", pageQuery(noSuchType, std::nullopt, pageSize + 1));
    }
    return 0;
  });
}

// The money questions' latency (sql/migrations/012_money_questions.sql) on a database filled by
// bench/money/generate.sql: each function called --calls times with a realistic window, p50 and
// p99, as the admin app calls them (SELECT *, every row fetched) and as the exporter does (its
// counts, with its session settings: no JIT, no parallel workers); then the plans of their
// statements, whose shape must stay "walk the window's rows, probe the other table by index".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Figures {
  double p50 = 0, p99 = 0;
  std::size_t rows = 0;
};

Figures time(pqxx::connection& c, const std::string& sql, int calls) {
  std::vector<double> ms;
  std::size_t rows = 0;
  for (int i = 0; i < calls; ++i) {
    pqxx::nontransaction tx(c);
    const auto start = Clock::now();
    rows = tx.exec(sql).size();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * ms.size()))];
  };
  return {at(0.5), at(0.99), rows};
}

// Prints the server's notices (auto_explain's plans) as they arrive.
class PrintNotices : public pqxx::errorhandler {
 public:
  using pqxx::errorhandler::errorhandler;
  bool operator()(const char message[]) noexcept override {
    std::fputs(message, stdout);
    return true;
  }
};

void report(const char* what, const Figures& f) {
  std::printf("%-58s %8zu %9.1f %9.1f\n", what, f.rows, f.p50, f.p99);
}

}  // namespace

int main(int argc, char** argv) {
  return idem::guardedMain("bench_money", [&] {
    std::optional<std::string> dsn;
    std::optional<std::string> window = std::string("24 hours"), grace = std::string("5 minutes");
    int calls = 30;
    bool plans = false;
    idem::CommandLine cli("bench_money", "bench_money [flags]");
    cli.text("db.dsn", "DSN", "a database filled by bench/money/generate.sql", dsn);
    cli.integer("calls", "N", "calls of each function; p50 and p99 over them", calls, 1, 10000);
    cli.text("window", "INTERVAL", "the reconciliation window", window);
    cli.text("grace", "INTERVAL", "the reconciliation grace", grace);
    cli.flag("plans", "print the exporter's plans", plans);
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;
    auto conn = idem::connect(idem::ConnectionSettings::resolve(dsn));
    pqxx::connection& c = *conn;

    std::string trace, agent, bizId;
    {
      pqxx::nontransaction tx(c);
      std::printf("attempts %lld, records %lld, fund flows %lld; window %s, grace %s\n",
                  tx.exec1("SELECT count(*) FROM idem.attempts")[0].as<long long>(),
                  tx.exec1("SELECT count(*) FROM idem.records")[0].as<long long>(),
                  tx.exec1("SELECT count(*) FROM idem.fund_flows")[0].as<long long>(),
                  window->c_str(), grace->c_str());
      // A recent trace and agent, and an overcharged object: what an operator opens after a page.
      const pqxx::row a = tx.exec1(
          "SELECT trace_id, agent_id FROM idem.attempts WHERE id = (SELECT max(id) - 1000 FROM "
          "idem.attempts)");
      trace = a[0].c_str();
      agent = a[1].c_str();
      bizId = tx.exec1(
                    "SELECT max(biz_id) FROM idem.fund_flows WHERE duplicate_of IS NOT NULL "
                    "AND created_at > now() - interval '1 day'")[0]
                  .c_str();
    }
    const std::string w = c.quote(*window) + "::interval", g = c.quote(*grace) + "::interval";
    const std::string money = "idem.money_moved_without_success('{payment}', " + w + ", " + g + ")";
    const std::string success =
        "idem.success_without_money_moved('{payment}', " + w + ", " + g + ")";
    const std::string over = "idem.overcharged_objects('{payment}', " + w + ")";

    std::printf("%-58s %8s %9s %9s\n", "as the admin app (SELECT *)", "rows", "p50 ms", "p99 ms");
    report("money_moved_without_success", time(c, "SELECT * FROM " + money, calls));
    report("success_without_money_moved", time(c, "SELECT * FROM " + success, calls));
    report("overcharged_objects", time(c, "SELECT * FROM " + over, calls));
    report(("trace_story(trace " + trace + ")").c_str(),
           time(c, "SELECT * FROM idem.trace_story(" + c.quote(trace) + ", NULL)", calls));
    report(("trace_story(agent " + agent + ")").c_str(),
           time(c, "SELECT * FROM idem.trace_story(NULL, " + c.quote(agent) + ")", calls));
    report(("business_object_story(payment " + bizId + ")").c_str(),
           time(c, "SELECT * FROM idem.business_object_story('payment', " + c.quote(bizId) + ")",
                calls));

    {
      pqxx::nontransaction tx(c);
      tx.exec("SET jit = off; SET max_parallel_workers_per_gather = 0");
    }
    const std::string mismatches =
        "SELECT (SELECT count(*) FROM " + money + "), (SELECT count(*) FROM " + success + ")";
    const std::string overcharges =
        "SELECT biz_type, currency, count(DISTINCT biz_id), sum(owed_minor) FROM " + over +
        " GROUP BY GROUPING SETS ((biz_type, currency), (biz_type))";
    std::printf("%-58s %8s %9s %9s\n", "as the exporter (its counts)", "rows", "p50 ms", "p99 ms");
    report("reconciliation (both mismatch counts)", time(c, mismatches, calls));
    report("overcharges (by biz type and currency)", time(c, overcharges, calls));
    if (plans) {
      // The questions are PL/pgSQL (sql/migrations/013): their statements' plans come from
      // auto_explain, as notices.
      PrintNotices printer(c);
      pqxx::nontransaction tx(c);
      tx.exec(
          "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
          "SET auto_explain.log_nested_statements = on; SET auto_explain.log_analyze = on; "
          "SET auto_explain.log_timing = off; SET auto_explain.log_level = notice; "
          "SET client_min_messages = notice");
      for (const std::string& sql : {mismatches, overcharges}) {
        std::printf("\nplans of %s\n", sql.c_str());
        std::fflush(stdout);
        tx.exec(sql);
      }
    }
    return 0;
  });
}

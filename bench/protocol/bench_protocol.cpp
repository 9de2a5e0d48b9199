// begin + complete round trips per second, against two yardsticks on tables of the same width:
//   plain      one INSERT (one commit), for scale;
//   hand       the seeds' hand-written pattern: INSERT ... ON CONFLICT DO NOTHING, then
//              UPDATE ... SET status = 'SUCCESS', version = version + 1 (two commits, no audit);
//   protocol   idem.begin then idem.complete with the claim token begin returned (schema v2: two
//              commits, plus the attempt row, the transition rows and the uniqueness checks),
//              through idem::ProtocolClient as it ships: prepared statements, planned once a
//              session;
//   unnamed    the same calls as unnamed statements, parsed and planned every call
//              (ProtocolClient::Statements::Unnamed, what a pooler in transaction mode leaves);
//   v1         with --v1.dsn, a database migrated only to schema version 1 (001..005): its begin
//              and its 3-argument complete as raw SQL, sent the way idem::ProtocolClient sends
//              v2's (unnamed statements, parsed and planned each call, as PgBouncer's transaction
//              mode requires), so that the cost of v2's guarantees is measured against v1 in the
//              same run and nothing else;
//   v1 prep    with --v1.prepared too, v1's calls as prepared statements: what planning each call
//              costs (an earlier version of this benchmark measured v1 this way against an
//              unnamed v2 and so charged v2 with the difference);
//   rows       with --floor, the rows a round trip writes, by hand and prepared, with no function,
//              trigger or check: on their keys alone (the unique indexes a guarantee needs), and on
//              copies of the shipped tables with all their indexes (the least any design that
//              keeps those rows can cost).
// Each client thread has its own connection and prepared statements; every statement is its own
// transaction, as the protocol requires. Variants are interleaved and repeated; the median counts.
// Besides throughput it reports the server CPU time and WAL bytes per operation (read from
// /proc/PID/stat of each backend and pg_current_wal_lsn()): on a busy machine throughput wanders,
// CPU per operation does not, and with 8 clients on 2 cores CPU is what limits throughput.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>
#include <vector>

#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSetup = R"SQL(
CREATE SCHEMA IF NOT EXISTS bench;
DROP TABLE IF EXISTS bench.plain, bench.hand;
CREATE TABLE bench.plain (
    idempotency_key text PRIMARY KEY, biz_type text NOT NULL, biz_id text NOT NULL,
    tool text NOT NULL, request_hash text NOT NULL, status text NOT NULL,
    version integer NOT NULL DEFAULT 1, lease_expires_at timestamptz, request_payload jsonb,
    response_payload jsonb, last_error text, attempt_count integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench.hand (LIKE bench.plain INCLUDING ALL);
ALTER TABLE bench.hand ADD CONSTRAINT hand_biz_status UNIQUE (biz_type, biz_id, status);
)SQL";

// With --floor: the rows the protocol writes for a round trip (the record, its attempt, the two
// transitions, the record's update), written by hand with no function, trigger or check around
// them, one statement a transaction. "rows, keys only": on tables with only the unique indexes a
// guarantee needs (the key, one live record a business object) and the history's primary keys;
// "rows, all indexes": on copies of the shipped tables (their domains, defaults and every index,
// the history partitioned by time, no triggers). The least any design that keeps those rows can
// cost, against what the shipped functions add.
constexpr const char* kFloorSetup = R"SQL(
DROP TABLE IF EXISTS bench.min_records, bench.min_attempts, bench.min_transitions,
                     bench.shipped_records, bench.shipped_attempts, bench.shipped_transitions;
CREATE TABLE bench.min_records (LIKE bench.plain INCLUDING DEFAULTS, claim_token_hash bytea,
                                PRIMARY KEY (idempotency_key));
CREATE UNIQUE INDEX min_records_one_live_per_biz ON bench.min_records (biz_type, biz_id)
    WHERE status <> 'FAILED';
CREATE TABLE bench.min_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, idempotency_key text NOT NULL,
    biz_type text NOT NULL, biz_id text NOT NULL, tool text NOT NULL,
    trigger_source text NOT NULL, outcome text NOT NULL, request_hash text NOT NULL,
    agent_id text, trace_id text, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench.min_transitions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, idempotency_key text NOT NULL,
    from_status text, to_status text NOT NULL, version integer NOT NULL,
    actor text NOT NULL DEFAULT session_user, actor_kind text NOT NULL, reason text,
    evidence jsonb, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench.shipped_records (LIKE idem.records INCLUDING ALL);
CREATE TABLE bench.shipped_attempts (LIKE idem.attempts INCLUDING ALL)
    PARTITION BY RANGE (created_at);
CREATE TABLE bench.shipped_attempts_now PARTITION OF bench.shipped_attempts
    FOR VALUES FROM (now() - interval '1 day') TO (now() + interval '1 day');
CREATE TABLE bench.shipped_transitions (LIKE idem.transitions INCLUDING ALL)
    PARTITION BY RANGE (created_at);
CREATE TABLE bench.shipped_transitions_now PARTITION OF bench.shipped_transitions
    FOR VALUES FROM (now() - interval '1 day') TO (now() + interval '1 day');
)SQL";

std::string floorBegin(const std::string& tables) {
  return "WITH r AS (INSERT INTO bench." + tables +
         "_records (idempotency_key, biz_type, biz_id, tool, request_hash, status, "
         "lease_expires_at, request_payload, claim_token_hash) VALUES ($1::text, 'payment', "
         "$2::text, 'pay', $3::text, 'PROCESSING', now() + interval '30 seconds', $4::jsonb, "
         "sha256(convert_to($1::text, 'UTF8'))) ON CONFLICT DO NOTHING "
         "RETURNING idempotency_key, version), "
         "a AS (INSERT INTO bench." +
         tables +
         "_attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome, "
         "request_hash) VALUES ($1, 'payment', $2, 'pay', 'initial', 'executed', $3)), "
         "t AS (INSERT INTO bench." +
         tables +
         "_transitions (idempotency_key, from_status, to_status, version, actor_kind) "
         "SELECT idempotency_key, NULL, 'PROCESSING', version, 'system' FROM r) "
         "SELECT version FROM r";
}

std::string floorComplete(const std::string& tables) {
  return "WITH u AS (UPDATE bench." + tables +
         "_records SET status = 'SUCCESS', version = version + 1, response_payload = $2::jsonb, "
         "updated_at = now() WHERE idempotency_key = $1 "
         "AND status = 'PROCESSING' RETURNING idempotency_key, version) "
         "INSERT INTO bench." +
         tables +
         "_transitions (idempotency_key, from_status, to_status, version, actor_kind) "
         "SELECT idempotency_key, 'PROCESSING', 'SUCCESS', version, 'system' FROM u";
}

constexpr const char* kVersion1Begin =
    "SELECT outcome, version FROM idem.begin($1, 'payment', $2, 'pay', $3, 'initial', $4::jsonb)";
constexpr const char* kVersion1Complete = "SELECT result FROM idem.complete($1, $2, $3::jsonb)";

constexpr const char* kPayload = R"({"amount_minor": 2990, "currency": "CNY", "tool": "pay"})";
constexpr const char* kResponse = R"({"status": "ok", "gateway_ref": "gw-1"})";

// utime + stime of a process in microseconds, or -1 when /proc does not show it (remote server).
long long cpuMicros(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoll(f);
    if (i == 15) stime = std::stoll(f);
  }
  return (utime + stime) * 1'000'000 / sysconf(_SC_CLK_TCK);
}

struct ClientResult {
  long long operations = 0;
  long long serverCpuMicros = -1;
};

enum class Variant {
  Plain,
  Hand,
  Protocol,
  ProtocolUnnamed,
  Version1,
  Version1Prepared,
  FloorMinimal,
  FloorShipped
};
const char* name(Variant v) {
  switch (v) {
    case Variant::Plain:
      return "plain INSERT";
    case Variant::Hand:
      return "hand-written";
    case Variant::Protocol:
      return "begin+complete";
    case Variant::ProtocolUnnamed:
      return "b+c unnamed";
    case Variant::Version1:
      return "v1 begin+compl";
    case Variant::Version1Prepared:
      return "v1 prepared";
    case Variant::FloorMinimal:
      return "rows, keys only";
    case Variant::FloorShipped:
      return "rows, all indexes";
  }
  return "?";
}

// One client: its own connection, runs the variant until the deadline, counts operations.
ClientResult client(const idem::ConnectionSettings& settings, Variant v, int thread, int run,
                    Clock::time_point deadline) {
  auto conn = idem::connect(settings);
  const int backend = conn->backendpid();
  conn->prepare("plain",
                "INSERT INTO bench.plain (idempotency_key, biz_type, biz_id, tool, request_hash, "
                "status, lease_expires_at, request_payload) VALUES ($1, 'payment', $2, 'pay', $3, "
                "'PROCESSING', now() + interval '30 seconds', $4::jsonb)");
  conn->prepare("hand_insert",
                "INSERT INTO bench.hand (idempotency_key, biz_type, biz_id, tool, request_hash, "
                "status, lease_expires_at, request_payload) VALUES ($1, 'payment', $2, 'pay', $3, "
                "'PROCESSING', now() + interval '30 seconds', $4::jsonb) ON CONFLICT DO NOTHING");
  conn->prepare("hand_update",
                "UPDATE bench.hand SET status = 'SUCCESS', version = version + 1, "
                "response_payload = $2::jsonb, updated_at = now() "
                "WHERE idempotency_key = $1 AND status = 'PROCESSING'");
  std::optional<idem::ProtocolClient> protocol;
  if (v == Variant::FloorMinimal || v == Variant::FloorShipped) {
    const std::string tables = v == Variant::FloorMinimal ? "min" : "shipped";
    conn->prepare("floor_begin", floorBegin(tables));
    conn->prepare("floor_complete", floorComplete(tables));
  } else if (v == Variant::Version1 || v == Variant::Version1Prepared) {
    conn->prepare("v1_begin", kVersion1Begin);
    conn->prepare("v1_complete", kVersion1Complete);
  } else {
    protocol.emplace(*conn, v == Variant::ProtocolUnnamed
                                ? idem::ProtocolClient::Statements::Unnamed
                                : idem::ProtocolClient::Statements::Prepared);
  }
  // Unique across runs of the benchmark too: the tables keep earlier runs' rows.
  static const auto session = std::chrono::system_clock::now().time_since_epoch().count();
  const std::string prefix =
      std::to_string(session) + "-r" + std::to_string(run) + "-t" + std::to_string(thread) + "-";
  long long n = 0;
  const long long cpuBefore = cpuMicros(backend);
  while (Clock::now() < deadline) {
    for (int batch = 0; batch < 20; ++batch, ++n) {
      const std::string key = prefix + std::to_string(n);
      const std::string biz = "order-" + key;
      switch (v) {
        case Variant::Plain: {
          pqxx::nontransaction tx(*conn);
          tx.exec_prepared("plain", key, biz, "h" + key, kPayload);
          break;
        }
        case Variant::Hand: {
          {
            pqxx::nontransaction tx(*conn);
            tx.exec_prepared("hand_insert", key, biz, "h" + key, kPayload);
          }
          pqxx::nontransaction tx(*conn);
          tx.exec_prepared("hand_update", key, kResponse);
          break;
        }
        case Variant::FloorMinimal:
        case Variant::FloorShipped: {
          {
            pqxx::nontransaction tx(*conn);
            if (tx.exec_prepared("floor_begin", key, biz, "h" + key, kPayload).size() != 1)
              throw std::runtime_error("floor begin " + key);
          }
          pqxx::nontransaction tx(*conn);
          if (tx.exec_prepared("floor_complete", key, kResponse).affected_rows() != 1)
            throw std::runtime_error("floor complete " + key);
          break;
        }
        case Variant::Protocol:
        case Variant::ProtocolUnnamed: {
          idem::BeginRequest r;
          r.key = key;
          r.bizType = "payment";
          r.bizId = biz;
          r.tool = "pay";
          r.requestHash = "h" + key;
          r.requestPayload = kPayload;
          const idem::BeginResult b = protocol->begin(r);
          if (b.outcome != idem::Outcome::Executed ||
              !protocol->complete(key, *b.version, kResponse, *b.claimToken).ok()) {
            throw std::runtime_error("protocol round trip did not succeed for " + key);
          }
          break;
        }
        case Variant::Version1:
        case Variant::Version1Prepared: {
          const bool prepared = v == Variant::Version1Prepared;
          int version = 0;
          {
            pqxx::nontransaction tx(*conn);
            const pqxx::row b =
                prepared ? tx.exec_prepared1("v1_begin", key, biz, "h" + key, kPayload)
                         : tx.exec_params1(kVersion1Begin, key, biz, "h" + key, kPayload);
            if (std::string(b[0].c_str()) != "executed")
              throw std::runtime_error("v1 begin " + key);
            version = b[1].as<int>();
          }
          pqxx::nontransaction tx(*conn);
          const pqxx::row c = prepared
                                  ? tx.exec_prepared1("v1_complete", key, version, kResponse)
                                  : tx.exec_params1(kVersion1Complete, key, version, kResponse);
          if (std::string(c[0].c_str()) != "ok") throw std::runtime_error("v1 complete " + key);
          break;
        }
      }
    }
  }
  const long long cpuAfter = cpuMicros(backend);
  return {n, cpuBefore < 0 || cpuAfter < 0 ? -1 : cpuAfter - cpuBefore};
}

struct Measurement {
  double opsPerSecond = 0;
  double serverCpuMicrosPerOp = -1;
  double walBytesPerOp = 0;
};

long long walPosition(const idem::ConnectionSettings& settings) {
  auto conn = idem::connect(settings);
  pqxx::nontransaction tx(*conn);
  return tx.exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")[0][0]
      .as<long long>();
}

Measurement measure(const idem::ConnectionSettings& settings, Variant v, int threads, int run,
                    std::chrono::milliseconds length) {
  std::vector<ClientResult> results(static_cast<std::size_t>(threads));
  const long long walBefore = walPosition(settings);
  const auto start = Clock::now();
  const auto deadline = start + length;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          results[static_cast<std::size_t>(t)] = client(settings, v, t, run, deadline);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench_protocol: client %d: %s\n", t, e.what());
          std::exit(1);
        }
      });
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  long long total = 0, cpu = 0;
  bool cpuKnown = true;
  for (const ClientResult& r : results) {
    total += r.operations;
    cpu += r.serverCpuMicros;
    cpuKnown = cpuKnown && r.serverCpuMicros >= 0;
  }
  Measurement m;
  m.opsPerSecond = static_cast<double>(total) / seconds;
  m.serverCpuMicrosPerOp = cpuKnown ? static_cast<double>(cpu) / static_cast<double>(total) : -1;
  m.walBytesPerOp =
      static_cast<double>(walPosition(settings) - walBefore) / static_cast<double>(total);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  return idem::guardedMain("bench_protocol", [&] {
    std::optional<std::string> dsn, v1Dsn;
    int seconds = 10, repeat = 3;
    std::vector<std::string> threadList{"1", "2", "8"};
    bool onlyProtocol = false, v1Prepared = false, floor = false;
    idem::CommandLine cli("bench_protocol", "bench_protocol [flags]");
    cli.text("db.dsn", "DSN", "database to measure in (a scratch database: tables are created)",
             dsn);
    cli.integer("seconds", "N", "length of one measurement", seconds, 1, 3600);
    cli.integer("repeat", "N", "measurements per variant and thread count; the median counts",
                repeat, 1, 99);
    cli.list("threads", "LIST", "client thread counts", threadList);
    cli.text("v1.dsn", "DSN",
             "also measure schema version 1's begin+complete in this database (migrated to 005 "
             "only)",
             v1Dsn);
    cli.flag("v1.prepared",
             "with --v1.dsn, also measure v1 through prepared statements (what planning costs)",
             v1Prepared);
    cli.flag("floor",
             "also measure the protocol's rows written by hand, on their keys alone and with "
             "all the shipped tables' indexes (no function, trigger or check)",
             floor);
    cli.flag("only-protocol", "run only begin+complete (for profiling the server)", onlyProtocol);
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;
    const auto settings = idem::ConnectionSettings::resolve(dsn);
    std::optional<idem::ConnectionSettings> v1Settings;
    if (v1Dsn) v1Settings = idem::ConnectionSettings::resolve(v1Dsn);
    std::vector<int> threadCounts;
    for (const std::string& t : threadList) {
      int n = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
      if (ec != std::errc() || end != t.data() + t.size() || n < 1) {
        throw idem::badValue("threads", "a list of whole numbers from 1", t);
      }
      threadCounts.push_back(n);
    }
    {
      auto conn = idem::connect(settings);
      pqxx::nontransaction tx(*conn);
      tx.exec(kSetup);
      if (floor) tx.exec(kFloorSetup);
    }

    std::printf("%-8s %-17s %12s %16s %12s\n", "clients", "variant", "ops/s", "server CPU us/op",
                "WAL B/op");
    int run = 0;
    for (int threads : threadCounts) {
      std::vector<Measurement> plain, hand, protocol, unnamed, version1, version1Prepared,
          floorMinimal, floorShipped;
      if (onlyProtocol) {
        const Measurement m =
            measure(settings, Variant::Protocol, threads, ++run, std::chrono::seconds(seconds));
        std::printf("%-8d %-17s %12.0f %16.1f %12.0f\n", threads, name(Variant::Protocol),
                    m.opsPerSecond, m.serverCpuMicrosPerOp, m.walBytesPerOp);
        continue;
      }
      for (int r = 0; r < repeat; ++r) {
        const auto length = std::chrono::seconds(seconds);
        plain.push_back(measure(settings, Variant::Plain, threads, ++run, length));
        hand.push_back(measure(settings, Variant::Hand, threads, ++run, length));
        protocol.push_back(measure(settings, Variant::Protocol, threads, ++run, length));
        unnamed.push_back(measure(settings, Variant::ProtocolUnnamed, threads, ++run, length));
        if (v1Settings)
          version1.push_back(measure(*v1Settings, Variant::Version1, threads, ++run, length));
        if (floor) {
          floorMinimal.push_back(measure(settings, Variant::FloorMinimal, threads, ++run, length));
          floorShipped.push_back(measure(settings, Variant::FloorShipped, threads, ++run, length));
        }
        if (v1Settings && v1Prepared) {
          version1Prepared.push_back(
              measure(*v1Settings, Variant::Version1Prepared, threads, ++run, length));
        }
      }
      auto median = [](std::vector<Measurement> v, double Measurement::*field) {
        std::sort(v.begin(), v.end(),
                  [&](const Measurement& a, const Measurement& b) { return a.*field < b.*field; });
        return v[v.size() / 2].*field;
      };
      const std::pair<Variant, std::vector<Measurement>*> rows[] = {
          {Variant::Plain, &plain},
          {Variant::Hand, &hand},
          {Variant::Protocol, &protocol},
          {Variant::ProtocolUnnamed, &unnamed},
          {Variant::Version1, &version1},
          {Variant::Version1Prepared, &version1Prepared},
          {Variant::FloorMinimal, &floorMinimal},
          {Variant::FloorShipped, &floorShipped}};
      for (const auto& [variant, ms] : rows) {
        if (ms->empty()) continue;
        std::printf("%-8d %-17s %12.0f %16.1f %12.0f\n", threads, name(variant),
                    median(*ms, &Measurement::opsPerSecond),
                    median(*ms, &Measurement::serverCpuMicrosPerOp),
                    median(*ms, &Measurement::walBytesPerOp));
      }
      const auto ops = [&](const std::vector<Measurement>& v) {
        return median(v, &Measurement::opsPerSecond);
      };
      const auto cpu = [&](const std::vector<Measurement>& v) {
        return median(v, &Measurement::serverCpuMicrosPerOp);
      };
      const double h = ops(hand), hc = cpu(hand), u = ops(unnamed), uc = cpu(unnamed);
      std::printf("%-8d begin+complete / hand-written: throughput %.2fx, server CPU per op %.2fx\n",
                  threads, ops(protocol) / h, cpu(protocol) / hc);
      std::printf(
          "%-8d unnamed begin+complete / hand-written: throughput %.2fx, server CPU per op "
          "%.2fx; prepared / unnamed: server CPU per op %.2fx\n",
          threads, u / h, uc / hc, cpu(protocol) / uc);
      if (!version1.empty()) {
        std::printf(
            "%-8d v1 begin+complete / hand-written: throughput %.2fx; v2 / v1, both unnamed: "
            "throughput %.2fx, server CPU per op %.2fx\n",
            threads, ops(version1) / h, u / ops(version1), uc / cpu(version1));
      }
      if (!version1Prepared.empty()) {
        std::printf(
            "%-8d v1 unnamed / v1 prepared: server CPU per op %.2fx; v2 (unnamed) / v1 "
            "prepared: %.2fx\n",
            threads, cpu(version1) / cpu(version1Prepared), uc / cpu(version1Prepared));
      }
      if (floor) {
        std::printf(
            "%-8d / hand-written, server CPU per op: rows with their keys only %.2fx, rows with "
            "all the shipped indexes %.2fx, begin+complete %.2fx; throughput %.2fx, %.2fx, "
            "%.2fx\n",
            threads, cpu(floorMinimal) / hc, cpu(floorShipped) / hc, cpu(protocol) / hc,
            ops(floorMinimal) / h, ops(floorShipped) / h, ops(protocol) / h);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    return 0;
  });
}

// begin + complete round trips per second, against two yardsticks on tables of the same width:
//   plain      one INSERT (one commit), for scale;
//   hand       the seeds' hand-written pattern: INSERT ... ON CONFLICT DO NOTHING, then
//              UPDATE ... SET status = 'SUCCESS', version = version + 1 (two commits, no audit);
//   protocol   idem.begin then idem.complete (two commits, plus the attempt row, the transition
//              rows and the uniqueness checks).
// Each client thread has its own connection and prepared statements; every statement is its own
// transaction, as the protocol requires. Variants are interleaved and repeated; the median counts.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <pqxx/pqxx>
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

constexpr const char* kPayload = R"({"amount_minor": 2990, "currency": "CNY", "tool": "pay"})";
constexpr const char* kResponse = R"({"status": "ok", "gateway_ref": "gw-1"})";

enum class Variant { Plain, Hand, Protocol };
const char* name(Variant v) {
  switch (v) {
    case Variant::Plain: return "plain INSERT";
    case Variant::Hand: return "hand-written";
    case Variant::Protocol: return "begin+complete";
  }
  return "?";
}

// One client: its own connection, runs the variant until the deadline, counts operations.
long long client(const idem::ConnectionSettings& settings, Variant v, int thread, int run,
                 Clock::time_point deadline) {
  auto conn = idem::connect(settings);
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
  idem::ProtocolClient protocol(*conn);
  const std::string prefix = "r" + std::to_string(run) + "-t" + std::to_string(thread) + "-";
  long long n = 0;
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
        case Variant::Protocol: {
          idem::BeginRequest r;
          r.key = key;
          r.bizType = "payment";
          r.bizId = biz;
          r.tool = "pay";
          r.requestHash = "h" + key;
          r.requestPayload = kPayload;
          const idem::BeginResult b = protocol.begin(r);
          if (b.outcome != idem::Outcome::Executed || !protocol.complete(key, *b.version, kResponse).ok()) {
            throw std::runtime_error("protocol round trip did not succeed for " + key);
          }
          break;
        }
      }
    }
  }
  return n;
}

double measure(const idem::ConnectionSettings& settings, Variant v, int threads, int run,
               std::chrono::milliseconds length) {
  std::vector<long long> counts(static_cast<std::size_t>(threads));
  const auto start = Clock::now();
  const auto deadline = start + length;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { counts[static_cast<std::size_t>(t)] = client(settings, v, t, run, deadline); });
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  long long total = 0;
  for (long long c : counts) total += c;
  return static_cast<double>(total) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<idem::FlagSpec> specs{
        {"db.dsn", true, "DSN", "database to measure in (a scratch database: tables are created)"},
        {"seconds", true, "N", "length of one measurement (default 10)"},
        {"repeat", true, "N", "measurements per variant and thread count; the median counts (default 3)"},
        {"threads", true, "LIST", "client thread counts (default 1,2,8)"}};
    const idem::CommandLine cli(std::vector<std::string>(argv + 1, argv + argc), specs);
    const auto settings = idem::ConnectionSettings::resolve(cli.value("db.dsn"));
    const auto seconds = cli.integer("seconds", 1, 3600).value_or(10);
    const auto repeat = cli.integer("repeat", 1, 99).value_or(3);
    std::vector<int> threadCounts{1, 2, 8};
    if (auto list = cli.value("threads")) {
      threadCounts.clear();
      for (std::size_t pos = 0; pos <= list->size();) {
        const std::size_t comma = std::min(list->find(',', pos), list->size());
        threadCounts.push_back(std::stoi(list->substr(pos, comma - pos)));
        pos = comma + 1;
      }
    }
    {
      auto conn = idem::connect(settings);
      pqxx::nontransaction tx(*conn);
      tx.exec(kSetup);
    }

    std::printf("%-8s %14s %14s %16s %10s %10s\n", "clients", "plain ops/s", "hand ops/s",
                "protocol ops/s", "vs hand", "vs plain");
    int run = 0;
    for (int threads : threadCounts) {
      std::vector<double> plain, hand, protocol;
      for (int r = 0; r < repeat; ++r) {
        const auto length = std::chrono::seconds(seconds);
        plain.push_back(measure(settings, Variant::Plain, threads, ++run, length));
        hand.push_back(measure(settings, Variant::Hand, threads, ++run, length));
        protocol.push_back(measure(settings, Variant::Protocol, threads, ++run, length));
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double p = median(plain), h = median(hand), q = median(protocol);
      std::printf("%-8d %14.0f %14.0f %16.0f %9.2fx %9.2fx\n", threads, p, h, q, q / h, q / p);
      std::fflush(stdout);
      (void)name;
    }
    return 0;
  } catch (const idem::UsageError& e) {
    std::cerr << "bench_protocol: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_protocol: " << e.what() << "\n";
    return 1;
  }
}

#include "downstream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>

#include "idem/database_error.hpp"
#include "statement_writer.hpp"

namespace idem::sim {
namespace {

std::vector<std::string> split(const std::string& line, char by) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, by)) out.push_back(field);
  return out;
}

}  // namespace

std::string SideEffect::journalLine() const {
  return key + '\t' + bizType + '\t' + bizId + '\t' +
         (kind ? std::string(format(*kind)) : std::string("-")) + '\t' +
         std::to_string(amountMinor) + '\t' + ref + '\t' + (deliberate ? "1" : "0") + '\t' +
         std::to_string(atUnixMs) + '\n';
}

std::optional<SideEffect> SideEffect::fromJournalLine(const std::string& line) {
  const std::vector<std::string> f = split(line, '\t');
  // A line cut short by a kill never happened; older journals have no time (seven fields).
  if (f.size() != 7 && f.size() != 8) return std::nullopt;
  SideEffect e;
  e.key = f[0];
  e.bizType = f[1];
  e.bizId = f[2];
  if (f[3] != "-") {
    const auto kind = tryParse<FundFlowKind>(f[3]);
    if (!kind) return std::nullopt;
    e.kind = kind;
  }
  e.amountMinor = std::stoll(f[4]);
  e.ref = f[5];
  e.deliberate = f[6] == "1";
  if (f.size() == 8) e.atUnixMs = std::stoll(f[7]);
  return e;
}

Downstream::Downstream(std::string journalPath, GatewayReporting reporting)
    : journalPath_(std::move(journalPath)), reporting_(std::move(reporting)) {
  if (journalPath_.empty()) return;
  std::ifstream in(journalPath_);
  std::string line;
  while (std::getline(in, line)) {
    const auto effect = SideEffect::fromJournalLine(line);
    if (!effect) continue;
    byKey_.emplace(effect->key, *effect);
    if (effect->kind && (reporting_.mode == GatewayReports::Ledger || callsBack(*effect)))
      unreported_.push_back(*effect);
  }
  // Executions are numbered per key and n; a restarted run counts on from what the journal holds.
  for (const auto& [key, effect] : byKey_) {
    const std::string base = "gw-" + effect.bizId + "-";
    if (effect.ref.starts_with(base)) {
      const std::string n =
          effect.ref.substr(base.size(), effect.ref.find('-', base.size()) - base.size());
      ++executionsOf_[key + "/" + n];
    }
  }
}

namespace {
// One write(2) per line with O_APPEND: whole lines, in order, from every agent thread; a kill
// can only cut the last one short, and a short line is read back as never having happened.
void appendLine(const std::string& path, const std::string& line, const char* what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(std::string("simulate: cannot open the ") + what + " " + path + ": " +
                             std::strerror(errno));
  }
  const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error(std::string("simulate: cannot write the ") + what + " " + path);
  }
}
}  // namespace

void Downstream::append(const SideEffect& effect) {
  if (!journalPath_.empty()) appendLine(journalPath_, effect.journalLine(), "downstream journal");
  appendTruth(effect);
}

// What the gateway's status API answers for the key: the latest movement made under it.
void Downstream::appendTruth(const SideEffect& effect) {
  if (reporting_.truthPath.empty() || !effect.kind) return;
  const nlohmann::json line{
      {"key", effect.key}, {"status", "succeeded"}, {"amount_minor", effect.amountMinor},
      {"currency", "CNY"}, {"id", effect.ref},      {"kind", format(*effect.kind)}};
  appendLine(reporting_.truthPath, line.dump() + "\n", "gateway truth file");
}

namespace {
// A stable share of movements, decided by the reference alone (the same run, the same choice).
double shareOf(const std::string& ref, std::uint64_t salt) {
  std::uint64_t h = 1469598103934665603ULL ^ salt;
  for (const char c : ref) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}
}  // namespace

bool Downstream::callsBack(const SideEffect& effect) const {
  return shareOf(effect.ref, 1) < reporting_.callbackShare;
}
bool Downstream::callsBackTwice(const SideEffect& effect) const {
  return shareOf(effect.ref, 2) < reporting_.callbackRepeatRate;
}

SideEffect Downstream::execute(const OperationPlan& plan, const std::string& key, int n,
                               bool deliberate) {
  SideEffect effect;
  effect.key = key;
  effect.bizType = plan.bizType;
  effect.bizId = plan.bizId;
  effect.kind = plan.flowKind;
  effect.amountMinor = plan.amountMinor;
  effect.deliberate = deliberate;
  effect.atUnixMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  std::lock_guard lock(mutex_);
  const int made = executionsOf_[key + "/" + std::to_string(n)]++;
  effect.ref = plan.gatewayRef(n) + (made == 0 ? "" : "-again" + std::to_string(made));
  append(effect);
  byKey_.emplace(key, effect);
  const bool reported =
      reporting_.mode == GatewayReports::Ledger || callsBack(effect);  // else: statement only
  if (effect.kind && reported) unreported_.push_back(effect);
  return effect;
}

std::vector<SideEffect> Downstream::effectsOf(const std::string& key) const {
  std::lock_guard lock(mutex_);
  std::vector<SideEffect> out;
  const auto [from, to] = byKey_.equal_range(key);
  for (auto it = from; it != to; ++it) out.push_back(it->second);
  return out;
}

int Downstream::reportToLedger(pqxx::connection& connection) {
  std::vector<SideEffect> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(unreported_);
    inFlight_ = batch.size();
  }
  // Webhooks arrive out of order: a round's callbacks in reverse.
  if (reporting_.mode == GatewayReports::Callbacks) std::reverse(batch.begin(), batch.end());
  ProtocolClient ledger(connection);
  std::size_t done = 0;
  try {
    for (; done < batch.size(); ++done) {
      const SideEffect& e = batch[done];
      if (reporting_.mode == GatewayReports::Ledger) {
        ledger.recordFundFlow({e.bizType, e.bizId, *e.kind, e.amountMinor, "CNY", e.ref, e.key});
        continue;
      }
      const int deliveries = callsBackTwice(e) ? 2 : 1;  // a re-delivery changes nothing
      for (int d = 0; d < deliveries; ++d) {
        pqxx::nontransaction tx(connection);
        tx.exec_params(
            "SELECT * FROM idem.ingest_callback($1, $2, $3, $4, 'CNY', $5, $6, $7, $8::jsonb)",
            reporting_.gateway, "evt-" + e.ref, std::string(format(*e.kind)), e.amountMinor, e.ref,
            e.key, e.bizId,
            nlohmann::json{{"type", "charge.succeeded"}, {"id", "evt-" + e.ref}}.dump());
      }
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    unreported_.insert(unreported_.begin(), batch.begin() + static_cast<std::ptrdiff_t>(done),
                       batch.end());
    inFlight_ = 0;
    rethrowAsDatabaseError("report to the ledger");
  }
  std::lock_guard lock(mutex_);
  inFlight_ = 0;
  return static_cast<int>(done);
}

bool Downstream::statementCaughtUp() const {
  std::lock_guard lock(mutex_);
  return unreported_.empty() && inFlight_ == 0;
}

void Downstream::writeStatement(const std::string& path, StatementFormat format) const {
  std::vector<SideEffect> movements;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, effect] : byKey_) {
      if (effect.kind) movements.push_back(effect);
    }
  }
  std::sort(movements.begin(), movements.end(), [](const SideEffect& a, const SideEffect& b) {
    return std::tie(a.atUnixMs, a.ref) < std::tie(b.atUnixMs, b.ref);
  });
  // Written beside it and renamed over it: an importer never reads half a file.
  const std::string partial = path + ".partial";
  writeStatementFile(partial, format, movements);
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("simulate: cannot move the statement into place at " + path + ": " +
                             std::strerror(errno));
  }
}

}  // namespace idem::sim

#include "downstream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "idem/database_error.hpp"

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
         std::to_string(amountMinor) + '\t' + ref + '\t' + (deliberate ? "1" : "0") + '\n';
}

std::optional<SideEffect> SideEffect::fromJournalLine(const std::string& line) {
  const std::vector<std::string> f = split(line, '\t');
  if (f.size() != 7) return std::nullopt;  // a line cut short by a kill: it never happened
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
  return e;
}

Downstream::Downstream(std::string journalPath) : journalPath_(std::move(journalPath)) {
  if (journalPath_.empty()) return;
  std::ifstream in(journalPath_);
  std::string line;
  while (std::getline(in, line)) {
    const auto effect = SideEffect::fromJournalLine(line);
    if (!effect) continue;
    byKey_.emplace(effect->key, *effect);
    if (effect->kind) unreported_.push_back(*effect);
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

void Downstream::append(const SideEffect& effect) {
  if (journalPath_.empty()) return;
  // One write(2) per line with O_APPEND: whole lines, in order, from every agent thread; a kill
  // can only cut the last one short, and a short line is read back as never having happened.
  const std::string line = effect.journalLine();
  const int fd = ::open(journalPath_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("simulate: cannot open the downstream journal " + journalPath_ + ": " +
                             std::strerror(errno));
  }
  const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("simulate: cannot write the downstream journal " + journalPath_);
  }
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
  std::lock_guard lock(mutex_);
  const int made = executionsOf_[key + "/" + std::to_string(n)]++;
  effect.ref = plan.gatewayRef(n) + (made == 0 ? "" : "-again" + std::to_string(made));
  append(effect);
  byKey_.emplace(key, effect);
  if (effect.kind) unreported_.push_back(effect);
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
    reporting_ = batch.size();
  }
  ProtocolClient ledger(connection);
  std::size_t done = 0;
  try {
    for (; done < batch.size(); ++done) {
      const SideEffect& e = batch[done];
      ledger.recordFundFlow({e.bizType, e.bizId, *e.kind, e.amountMinor, "CNY", e.ref, e.key});
    }
  } catch (const DatabaseError&) {
    std::lock_guard lock(mutex_);
    unreported_.insert(unreported_.begin(), batch.begin() + static_cast<std::ptrdiff_t>(done),
                       batch.end());
    reporting_ = 0;
    throw;
  }
  std::lock_guard lock(mutex_);
  reporting_ = 0;
  return static_cast<int>(done);
}

bool Downstream::statementCaughtUp() const {
  std::lock_guard lock(mutex_);
  return unreported_.empty() && reporting_ == 0;
}

}  // namespace idem::sim

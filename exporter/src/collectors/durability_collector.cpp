// Durability: the server against the durability contract, as `idemctl doctor` checks it (one
// definition, idem/durability.hpp). Publishes idempotency_db_durability_problem{check},
// idempotency_db_standbys, idempotency_db_synchronous_standbys (when this login may see the
// standbys' state: pg_monitor) and idempotency_db_clock_skew_seconds. A replicated primary with
// no synchronous standby is the failover that loses acknowledged claims: its alert pages.
#include <map>
#include <mutex>
#include <optional>

#include "collectors/registry.hpp"
#include "idem/durability.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

class DurabilityCollector : public Collector {
 public:
  std::string_view name() const override { return "durability"; }
  // Settings and standbys change rarely; the check costs a few catalog reads.
  std::chrono::milliseconds interval() const override { return std::chrono::seconds(15); }

  void update(pqxx::connection& connection) override {
    const DurabilityFacts facts = readDurabilityFacts(connection);
    Figures next;
    for (const std::string& check : durabilityCheckNames()) next.problems[check] = 0;
    for (const DurabilityFinding& f : durabilityFindings(facts)) {
      if (f.level == FindingLevel::Problem) next.problems[f.check] = 1;
    }
    next.standbys = facts.standbys;
    next.synchronousStandbys = facts.synchronousStandbys;
    next.clockSkew = facts.clockSkewSeconds;
    std::lock_guard lock(mutex_);
    state_ = std::move(next);
  }

  void collect(std::vector<prometheus::MetricFamily>& out) const override {
    std::lock_guard lock(mutex_);
    if (!state_) return;  // nothing read yet
    auto problem = makeFamily(
        "idempotency_db_durability_problem",
        "1 when the durability check finds a problem with the server (idemctl doctor says what to "
        "change), 0 otherwise, by check: fsync, full_page_writes, synchronous_commit (the server's "
        "or a protocol login's), synchronous_standby, replication_slots, clock.",
        prometheus::MetricType::Gauge);
    for (const auto& [check, value] : state_->problems)
      addSample(problem, {{"check", check}}, value);
    out.push_back(std::move(problem));
    auto standbys = makeFamily("idempotency_db_standbys",
                               "Standbys streaming WAL from this server (0 on a standby).",
                               prometheus::MetricType::Gauge);
    addSample(standbys, {}, state_->standbys);
    out.push_back(std::move(standbys));
    if (state_->synchronousStandbys) {
      auto sync = makeFamily("idempotency_db_synchronous_standbys",
                             "Of those standbys, the ones this primary waits for before it "
                             "acknowledges a commit; absent when the login may not see it "
                             "(grant pg_monitor).",
                             prometheus::MetricType::Gauge);
      addSample(sync, {}, *state_->synchronousStandbys);
      out.push_back(std::move(sync));
    }
    auto skew = makeFamily("idempotency_db_clock_skew_seconds",
                           "The database server's clock minus the exporter's machine's.",
                           prometheus::MetricType::Gauge);
    addSample(skew, {}, state_->clockSkew);
    out.push_back(std::move(skew));
  }

 private:
  struct Figures {
    std::map<std::string, double> problems;
    double standbys = 0;
    std::optional<double> synchronousStandbys;
    double clockSkew = 0;
  };
  mutable std::mutex mutex_;
  std::optional<Figures> state_;
};

// The durability collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered =
    registerCollector({.name = "durability", .order = 90, .make = [](const CollectorContext&) {
                         return std::make_unique<DurabilityCollector>();
                       }});

}  // namespace
}  // namespace idem::exporter

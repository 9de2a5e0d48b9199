// The systems the simulated agents call: the payment gateway (charges, refunds, payouts) and the
// coupon service. Every execution is a side effect with a reference of its own, and the downstream
// keeps its own record of each (its statement), independent of the idem schema:
//   * the operator consults it the way a person checks the gateway's or the coupon system's
//     console before settling a record the ledger cannot decide;
//   * the gateway reports money movements to the ledger through its own login (idem_ledger),
//     whether or not the agent heard back: every one as a ledger feed, or, as production knows
//     it, a share as webhook callbacks and the whole day in its statement (writeStatement);
//   * it keeps the truth a status API answers from (a JSON lines file for the stand-in gateway);
//   * with a journal file, it survives the simulator being killed: a restarted simulator reads it
//     back and the gateway reports what was not yet in the ledger.
// A second execution of the same operation is a side effect of its own with a new reference,
// as a real gateway would book it, so that the ledger shows it for what it is.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/protocol_client.hpp"
#include "plan.hpp"

namespace idem::sim {

struct SideEffect {
  std::string key;
  std::string bizType;
  std::string bizId;
  std::optional<FundFlowKind> kind;  // the ledger line it leaves; none for a coupon
  std::int64_t amountMinor = 0;
  std::string ref;            // the downstream's own reference
  bool deliberate = false;    // a buggy downstream's or a careless client's extra execution
  std::int64_t atUnixMs = 0;  // when the downstream made it (0: read from an older journal)
  std::string journalLine() const;
  static std::optional<SideEffect> fromJournalLine(const std::string& line);
};

// How the gateway reports to the ledger (SimulationConfig's gatewayReports and its shares).
struct GatewayReporting {
  GatewayReports mode = GatewayReports::Ledger;
  double callbackShare = 1.0;
  double callbackRepeatRate = 0.0;
  std::string gateway = "sim-gateway";
  std::string truthPath;  // empty: no truth file
};

class Downstream {
 public:
  // Reads the journal back when there is one (a restarted simulation continues its statement).
  explicit Downstream(std::string journalPath, GatewayReporting reporting = {});

  // Carries out one execution of `plan` under `key`: journals it first, then it has happened.
  // `n` numbers the executions an operation asks for (the buggy downstream's second charge is 2,
  // a careless client's are 11 and up); a repeat of an execution already made gets a new reference.
  SideEffect execute(const OperationPlan& plan, const std::string& key, int n, bool deliberate);

  // What the downstream's own records say about a key: the effects it made under it.
  std::vector<SideEffect> effectsOf(const std::string& key) const;

  // The gateway reports what it has not yet reported to the ledger (money movements only), on a
  // login granted idem_ledger. Returns how many it recorded; what fails is tried again next time.
  int reportToLedger(pqxx::connection& connection);
  // Every money movement the gateway reports as it goes is in the ledger (in callbacks mode,
  // those it calls back about; the rest wait for the statement).
  bool statementCaughtUp() const;
  // The day's statement: every money movement made, in `format`, whoever heard back. Throws
  // std::runtime_error when the file cannot be written.
  void writeStatement(const std::string& path, StatementFormat format) const;

 private:
  void append(const SideEffect& effect);
  void appendTruth(const SideEffect& effect);
  // One callback, in callbacks mode: whether this movement gets one, and whether twice.
  bool callsBack(const SideEffect& effect) const;
  bool callsBackTwice(const SideEffect& effect) const;

  std::string journalPath_;
  GatewayReporting reporting_;
  mutable std::mutex mutex_;
  std::multimap<std::string, SideEffect> byKey_;
  std::map<std::string, int> executionsOf_;  // "key/n": how many times made
  std::vector<SideEffect> unreported_;
  std::size_t inFlight_ = 0;  // taken by reportToLedger, not yet recorded
};

}  // namespace idem::sim

// Simulated agent traffic through the real protocol functions: several agents (threads, one
// connection each) pay, refund and issue coupons through idem.begin/complete/fail/mark_unknown,
// while a simulated downstream gateway writes the ledger through idem.record_fund_flow. It produces
// every case idemwatch exists for, at rates you set: retries from each source, response timeouts
// that end in UNKNOWN, crashes that leave PROCESSING past its lease, LLM retries with changed
// arguments, concurrent duplicates of one key, callbacks that re-deliver, and a buggy downstream
// that sometimes charges twice under different gateway references.
//
// Its agents behave like a correct runtime under schema contract v3: they carry the claim token,
// report their own side effects with it, say honestly whether a failure may be retried (a declined
// card is final, a refused connection is not), report a late answer at the version the server
// returns, and on any other `conflict` or `not_claimant` re-read the record (begin again) instead
// of running the side effect again. The downstream keeps its own records and the gateway reports
// to the ledger through its own login. A share of careless clients (--careless-rate) tries, on
// purpose, every hole the schema closes; the summary counts each attempt and whether the database
// refused it.
// Beside the agents, an operator may settle stuck records and a reconciler run idem.reconcile()
// during the run, as a deployment's people and cron jobs do.
//
// Deterministic under a seed: what happens to operation i (its business object, amount, faults and
// retries) is a pure function of (seed, i); threads only decide who runs it and when.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "idem/connection_settings.hpp"
#include "idem/statement_formats.hpp"
#include "idem/vocabulary.hpp"

namespace idem::sim {

enum class GatewayReports { Ledger, Callbacks };

struct SimulationConfig {
  ConnectionSettings connection;
  int agents = 4;
  std::uint64_t seed = 1;
  std::int64_t operations = 1000;         // business operations to run; 0: no bound
  std::chrono::milliseconds duration{0};  // wall-clock bound; 0: none
  double operationsPerSecond = 0;         // across all agents; 0: as fast as the database allows
  std::vector<std::string> bizTypes{"payment", "refund", "coupon"};
  // A separate namespace for keys and business ids, so runs against one database never collide.
  std::string runId;

  // Faults and retries, each a probability per operation.
  double responseLossRate = 0.05;  // downstream did it, the response was lost: UNKNOWN
  double crashRate = 0.01;         // the agent dies after `executed`: PROCESSING past its lease
  double crashBeforeChargeShare = 0.5;  // of crashes, how many die before the downstream call
  // Failures; each is followed by a framework retry, 5% together as in version 1's declines.
  double declineRate = 0.03;   // definite failure (card declined): final FAILED, the retry replayed
  double refusedRate = 0.02;   // connection refused before sending: retryable FAILED, run again
  double llmRetryRate = 0.06;  // the model re-issues the same call (same key)
  double frameworkRetryRate = 0.04;       // the framework's retry policy fires (same key)
  double httpRetryRate = 0.05;            // the HTTP client retries (same key)
  double callbackRate = 0.05;             // an async callback re-drives the request (same key)
  double mismatchRate = 0.02;             // an LLM retry with changed arguments (same key)
  double newKeyRate = 0.01;               // an LLM retry under a fresh key (same business object)
  double concurrentDuplicateRate = 0.02;  // the request handed to several agents at once
  int concurrentCopies = 3;
  double doubleChargeRate = 0.0;  // buggy downstream: a second charge under another reference
  double callbackResolvesUnknownRate = 0.6;  // a gateway callback later settles an UNKNOWN record
  // Operations whose client is careless and tries the holes the schema closes (CarelessHole).
  double carelessRate = 0.0;

  std::chrono::milliseconds downstreamLatency{0};  // each downstream call takes this long
  std::chrono::milliseconds lease{15'000};
  std::chrono::milliseconds expireLeasesEvery{0};  // 0: never (leave stuck records for people)
  // An operator settles this run's stuck records this often (SUCCESS where money moved, FAILED
  // where nothing did), through idem::settleRecord; 0: never. With carelessRate > 0 the operator
  // is careless too: it also tries to settle FAILED records whose lease is live.
  std::chrono::milliseconds settleEvery{0};
  // With settleEvery: after the last agent stops, the operator, the lease sweeper and the
  // reconciler go on until none of this run's records is open, PROCESSING (a crashed claim, its
  // lease perhaps still running) or UNKNOWN: through a lease, then as long as the open records
  // keep falling (three of their rounds, at least a second, without one settled ends it), as
  // people finish the day's queue. Off: they stop with the agents, and a claim
  // that crashed near the end is left for whoever looks next.
  bool settleUntilDone = false;
  // idem.reconcile() this often; 0: never.
  std::chrono::milliseconds reconcileEvery{0};
  // Whom the operator and the reconciler log in as (an idem_operator and an idem_reconciler
  // login); empty DSN: the agents' connection.
  ConnectionSettings operatorConnection;
  ConnectionSettings reconcilerConnection;

  // The downstream's own records of every side effect, one line each, appended as it acts; a
  // restarted simulation reads them back. Empty: kept in memory for this run only.
  std::string downstreamJournal;
  // The gateway reports every money movement to the ledger this often, through its own login (an
  // idem_ledger; empty DSN: the agents' connection), whether or not the agent heard back: its
  // callbacks and statement. 0: never (a lost response then leaves no line in the ledger).
  std::chrono::milliseconds gatewayReportEvery{200};
  ConnectionSettings ledgerConnection;
  // How the gateway reports, as production knows it. Ledger (the default): every movement, as a
  // feed of ledger lines (idem.record_fund_flow). Callbacks: only a share of them, as webhook
  // events (idem.ingest_callback, some delivered twice, a round's in reverse order); the rest
  // reach idemwatch only with the day's statement (statementOut) or a status lookup
  // (gatewayTruth), as a lost response does when no callback comes.
  GatewayReports gatewayReports = GatewayReports::Ledger;
  double gatewayCallbackShare = 0.6;
  double gatewayCallbackRepeatRate = 0.1;
  std::string gatewayName = "sim-gateway";
  // Written when the run ends: the day's statement of every money movement the downstream made,
  // in statementFormat (stripe, adyen or camt.053), whether or not anyone heard back.
  std::string statementOut;
  StatementFormat statementFormat = StatementFormat::StripeItemized;
  // Also rewrite it this often while the run goes on (a gateway's intraday file: each one holds
  // the day so far, so consecutive files overlap); 0: only at the end.
  std::chrono::milliseconds statementEvery{0};
  // JSON lines the downstream appends as it acts, the truth a status API answers from
  // (idemwatch-gateway-standin --truth).
  std::string gatewayTruth;

  // Through idemwatch-proxy (through_proxy.hpp): the agents' requests go to this proxy
  // ("http://HOST:PORT", whose routes are named after the tools and forward to toolListen) and
  // the downstream answers them as an HTTP tool on toolListen ("HOST:PORT"). Empty: the agents
  // call the protocol in-process.
  std::string throughProxy;
  std::string toolListen;

  // Checks ranges and combinations; returns one sentence per problem.
  std::vector<std::string> validate() const;
};

// The holes a careless client tries. Each is refused by the database.
enum class CarelessHole {
  FailUnknownWithoutToken,  // fail an UNKNOWN record with no token, then begin again
  FailWithoutToken,         // fail someone else's PROCESSING claim with no token
  CompleteForeignClaim,     // complete someone else's claim with the version a payload_mismatch
                            // handed out and a token of its own
  CompleteStaleVersion,     // complete with a stale version and no token
  RetryFinalFailure,        // begin again after a final FAILED (declined card)
  NewKeyForPaidObject,      // begin under a fresh key for a business object that was paid
  RebeginRetired,           // a retired key: begin again, then under a fresh key
  SettleLiveLease,          // the operator settles FAILED a PROCESSING record whose lease is live
  ForgeEvidence,            // record a flow under another agent's UNKNOWN key without its token
};
inline constexpr std::array<CarelessHole, 9> kCarelessHoles{CarelessHole::FailUnknownWithoutToken,
                                                            CarelessHole::FailWithoutToken,
                                                            CarelessHole::CompleteForeignClaim,
                                                            CarelessHole::CompleteStaleVersion,
                                                            CarelessHole::RetryFinalFailure,
                                                            CarelessHole::NewKeyForPaidObject,
                                                            CarelessHole::RebeginRetired,
                                                            CarelessHole::SettleLiveLease,
                                                            CarelessHole::ForgeEvidence};
static_assert(listsEveryEnumeratorInOrder(kCarelessHoles), "kCarelessHoles is stale");
const char* describe(CarelessHole hole);

struct HoleCount {
  std::int64_t tried = 0;
  std::int64_t refused = 0;
};

// What the simulation did, counted on the client side. The tables hold the truth; tests compare.
struct SimulationSummary {
  std::int64_t operations = 0;
  std::map<std::pair<TriggerSource, Outcome>, std::int64_t> attempts;
  std::int64_t charges = 0;        // DEBIT flows the downstream reported (duplicates included)
  std::int64_t doubleCharges = 0;  // extra charges by the buggy downstream
  std::int64_t responsesLost = 0;  // marked UNKNOWN after a lost response
  std::int64_t crashes = 0;
  std::int64_t declines = 0;               // final failures (retry_allowed = false)
  std::int64_t refusedConnections = 0;     // retryable failures, run again
  std::int64_t finalFailuresReplayed = 0;  // retries answered `replayed` FAILED: back to the model
  std::int64_t rereads = 0;         // conflict / not_claimant answered by begin again, never re-run
  std::int64_t settledSuccess = 0;  // by the simulated operator
  std::int64_t settledFailed = 0;
  std::int64_t settleRefused = 0;  // money_moved, lease_active, conflict...: the server said no
  std::int64_t reconciled = 0;     // resolved by idem.reconcile()
  std::int64_t roundsFailed = 0;   // lease sweeper, operator or reconciler rounds that failed
  std::map<CarelessHole, HoleCount> holes;
  std::int64_t unknownResolvedByCallback = 0;
  std::int64_t lateAnswers = 0;  // completes after the lease ran out, at the version returned
  std::int64_t lateClaims = 0;  // claims acknowledged after their lease ran out: given back, unused
  std::int64_t resent = 0;      // protocol calls sent again because their connection broke
  std::int64_t reportedByGateway = 0;  // flows the gateway's side recorded (most already in)
  std::int64_t errors = 0;             // database errors (HTTP ones through a proxy) the agents saw
  std::chrono::milliseconds elapsed{0};

  std::int64_t attemptsTotal() const;
  // Careless attempts the database let through (0 on a database at the current schema).
  std::int64_t holesOpen() const;
  // A table of counts per source and outcome plus the fault counts, for a terminal.
  std::string render() const;
};

struct Progress {
  std::int64_t operations = 0;
  std::int64_t attempts = 0;
  std::int64_t errors = 0;
  std::chrono::milliseconds elapsed{0};
};

// Runs until `operations` are done, `duration` has passed or `stop` becomes true. Throws
// DatabaseError when the database cannot be reached at the start, or when the operator's or the
// reconciler's login lacks its role; later errors are counted.
// `progress` (optional) is called about once a second from the calling thread.
SimulationSummary simulate(const SimulationConfig& config, const std::atomic<bool>& stop,
                           const std::function<void(const Progress&)>& progress = {});

}  // namespace idem::sim

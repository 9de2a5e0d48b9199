// The state machine of schema contract v2, role by role: every call each role may make on a record
// in every state, with the result code the contract gives it (and the record unchanged whenever it
// is refused); every function a role may not call refused by PostgreSQL (42501); and every direct
// UPDATE of a status refused for every role (42501), and for the owner by the trigger unless the
// table allows it.
#include <QtTest>
#include <set>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"
#include "test_requests.hpp"

using namespace idem;

namespace {

// The states a record can be found in, as far as the v2 table tells them apart.
enum class State { Processing, ProcessingExpired, Unknown, Success, FailedFinal, FailedRetryable };
constexpr State kStates[] = {State::Processing, State::ProcessingExpired, State::Unknown,
                             State::Success,    State::FailedFinal,       State::FailedRetryable};

const char* name(State s) {
  constexpr const char* kNames[] = {"PROCESSING", "PROCESSING-past-lease", "UNKNOWN",
                                    "SUCCESS",    "FAILED-final",          "FAILED-retryable"};
  static_assert(std::size(kNames) == std::size(kStates));
  return kNames[static_cast<std::size_t>(s)];
}

// The calls several roles are checked on (see TestStateMachine::bind for the $ names).
constexpr const char* kComplete = "SELECT result FROM idem.complete($key, $version, '{}', $token)";
constexpr const char* kFail = "SELECT result FROM idem.fail($key, $version, 'x', $token)";
constexpr const char* kSettle = "SELECT result FROM idem.settle($key, $version, 'SUCCESS', 'r')";
constexpr const char* kResolve =
    "SELECT result FROM idem.resolve($key, $version, 'SUCCESS', 'r', '{\"e\": 1}')";
constexpr const char* kReconcile = "SELECT idem.reconcile()";
constexpr const char* kInv = "invalid_transition";

struct Made {
  std::string key;
  int version = 0;
  std::string token;
};

}  // namespace

class TestStateMachine : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TestDatabase> db_;
  std::unique_ptr<pqxx::connection> owner_;
  std::map<std::string, std::string> login_;  // group role -> login role
  int serial_ = 0;

  std::string text(const std::string& sql) {
    pqxx::nontransaction tx(*owner_);
    const auto r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string("<null>") : std::string(r[0][0].c_str());
  }
  std::string row(const std::string& key) {
    return text(
        "SELECT r::text || (SELECT count(*) FROM idem.transitions t WHERE t.idempotency_key = "
        "r.idempotency_key) FROM idem.records r WHERE idempotency_key = '" +
        key + "'");
  }

  static void setup(bool ok) {
    if (!ok) throw std::runtime_error("could not bring a record into its state");
  }
  // A fresh record in the given state, made through the protocol.
  Made make(State s) {
    ProtocolClient p(*owner_);
    Made m;
    m.key = "sm-" + std::to_string(++serial_);
    const BeginResult b =
        p.begin(test::payRequest(m.key, "order-" + m.key, "payment",
                                 s == State::Processing ? std::chrono::milliseconds(3'600'000)
                                                        : std::chrono::milliseconds(1)));
    m.token = b.claimToken.value();
    m.version = 1;
    switch (s) {
      case State::Processing:
      case State::ProcessingExpired:
        break;
      case State::Unknown:
        setup(p.markUnknown(m.key, 1, "timeout", m.token).ok());
        m.version = 2;
        break;
      case State::Success:
        setup(p.complete(m.key, 1, "{}", m.token).ok());
        m.version = 2;
        break;
      case State::FailedFinal:
        setup(p.fail(m.key, 1, "declined", m.token, false).ok());
        m.version = 2;
        break;
      case State::FailedRetryable:
        setup(p.fail(m.key, 1, "refused", m.token, true).ok());
        m.version = 2;
        break;
    }
    if (s != State::Processing) QTest::qWait(2);  // the 1 ms lease has certainly ended
    return m;
  }

  // Runs one call as a login role: the result code, or the SQLSTATE of the error.
  std::string callAs(const std::string& group, const std::string& sql) {
    pqxx::connection c(db_->dsnAs(login_.at(group)));
    try {
      return translatingErrors("call", [&] {
        pqxx::nontransaction tx(c);
        const auto r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? std::string("<null>")
                                              : std::string(r[0][0].c_str());
      });
    } catch (const DatabaseError& e) {
      return e.sqlstate();
    }
  }

  // A call as SQL on a record: $key, $bizId and $token stand for the record's (quoted), $version
  // for its version and $stale for the next one.
  struct Call {
    const char* label;
    const char* sql;
    std::map<State, std::string> expected;  // result code per state
  };

  static std::string bind(std::string sql, const Made& m) {
    const std::pair<const char*, std::string> values[] = {
        {"$key", "'" + m.key + "'"},
        {"$bizId", "'order-" + m.key + "'"},
        {"$token", "'" + m.token + "'"},
        {"$version", std::to_string(m.version)},
        {"$stale", std::to_string(m.version + 1)}};
    for (const auto& [name, value] : values) {
      for (auto at = sql.find(name); at != std::string::npos;
           at = sql.find(name, at + value.size()))
        sql.replace(at, std::string_view(name).size(), value);
    }
    return sql;
  }

  // Every call of `calls` as `group` on a fresh record in every state.
  void check(const std::string& group, const std::vector<Call>& calls) {
    std::vector<std::string> wrong;
    for (const Call& call : calls) {
      for (State s : kStates) {
        const Made m = make(s);
        const std::string before = row(m.key);
        const std::string got = callAs(group, bind(call.sql, m));
        const std::string& want = call.expected.at(s);
        if (got != want) {
          wrong.push_back(group + " " + call.label + " on " + name(s) + ": got " + got + ", want " +
                          want);
        }
        if (want != "ok" && row(m.key) != before) {
          wrong.push_back(group + " " + call.label + " on " + name(s) +
                          " was refused but changed the record");
        }
        if (want == "ok" && row(m.key) == before) {
          wrong.push_back(group + " " + call.label + " on " + name(s) +
                          " said ok but changed nothing");
        }
      }
    }
    QVERIFY2(wrong.empty(),
             wrong.empty()
                 ? ""
                 : (std::to_string(wrong.size()) + " wrong, first: " + wrong.front()).c_str());
  }

  static std::map<State, std::string> all(const std::string& code) {
    std::map<State, std::string> out;
    for (State s : kStates) out[s] = code;
    return out;
  }
  // The result codes in kStates' order: PROCESSING, past its lease, UNKNOWN, SUCCESS, FAILED
  // final, FAILED retryable.
  static std::map<State, std::string> byState(const std::vector<std::string>& codes) {
    std::map<State, std::string> out;
    for (std::size_t i = 0; i < std::size(kStates); ++i) out[kStates[i]] = codes.at(i);
    return out;
  }
  // settle FAILED and resolve: refused while the lease is live, and on a settled record.
  static std::map<State, std::string> pastTheLeaseOrUnknown() {
    return byState({"lease_active", "ok", "ok", kInv, kInv, kInv});
  }

 private slots:
  void initTestCase() {
    db_ = std::make_unique<test::TestDatabase>("tst_state_machine");
    owner_ = db_->connect();
    for (const char* group : {"idem_writer", "idem_operator", "idem_reconciler", "idem_reader"}) {
      login_[group] = db_->createLoginRole(std::string("sm_") + (group + 5), group);
    }
  }
  void cleanupTestCase() {
    owner_.reset();
    db_.reset();
  }

  // The claimant's answers, with its token. UNKNOWN -> FAILED is gone in v2.
  void writerAnswersAsTheClaimantOnly() {
    const auto untilAnswered = byState({"ok", "ok", kInv, kInv, kInv, kInv});
    check(
        "idem_writer",
        {
            {"complete", kComplete, byState({"ok", "ok", "ok", kInv, kInv, kInv})},
            {"fail", kFail, untilAnswered},
            {"fail retry_allowed",
             "SELECT result FROM idem.fail($key, $version, 'x', $token, true)", untilAnswered},
            {"mark_unknown", "SELECT result FROM idem.mark_unknown($key, $version, 'x', $token)",
             untilAnswered},
            {"complete without the token",
             "SELECT result FROM idem.complete($key, $version, '{}', gen_random_uuid())",
             all("not_claimant")},
            {"fail without the token",
             "SELECT result FROM idem.fail($key, $version, 'x', NULL, true)", all("not_claimant")},
            {"complete with a stale version",
             "SELECT result FROM idem.complete($key, $stale, '{}', $token)", all("conflict")},
            {"settle", kSettle, all("42501")},
            {"resolve", kResolve, all("42501")},
            {"reconcile", kReconcile, all("42501")},
        });
  }

  // settle: past the lease only; FAILED -> SUCCESS is a correction; SUCCESS is final.
  void operatorSettlesOnlyWhatTheTableAllows() {
    check("idem_operator",
          {
              {"settle SUCCESS",
               "SELECT result FROM idem.settle($key, $version, 'SUCCESS', 'statement line')",
               byState({"lease_active", "ok", "ok", kInv, "ok", "ok"})},
              {"settle FAILED",
               "SELECT result FROM idem.settle($key, $version, 'FAILED', 'no such payment')",
               pastTheLeaseOrUnknown()},
              {"settle stale version",
               "SELECT result FROM idem.settle($key, $stale, 'SUCCESS', 'stale')", all("conflict")},
              {"complete", kComplete, all("42501")},
              {"resolve", kResolve, all("42501")},
              {"begin",
               "SELECT outcome FROM idem.begin($key, 'payment', $bizId, 'pay', NULL, 'initial', "
               "'{}')",
               all("42501")},
          });
  }

  // resolve: UNKNOWN or past the lease, never a FAILED or SUCCESS record.
  void reconcilerResolvesOnlyWhatTheTableAllows() {
    check("idem_reconciler",
          {
              {"resolve SUCCESS",
               "SELECT result FROM idem.resolve($key, $version, 'SUCCESS', 'lookup', '{\"gw\": "
               "\"paid\"}')",
               pastTheLeaseOrUnknown()},
              {"resolve FAILED",
               "SELECT result FROM idem.resolve($key, $version, 'FAILED', 'lookup', '{\"gw\": "
               "\"none\"}')",
               pastTheLeaseOrUnknown()},
              {"settle", kSettle, all("42501")},
              {"complete", kComplete, all("42501")},
              {"fail", kFail, all("42501")},
          });
  }

  void readerChangesNothing() {
    check("idem_reader", {{"complete", kComplete, all("42501")},
                          {"settle", kSettle, all("42501")},
                          {"resolve", kResolve, all("42501")},
                          {"reconcile", kReconcile, all("42501")}});
  }

  // No role may UPDATE a record directly, to any status.
  void noRoleUpdatesARecordDirectly() {
    std::vector<std::string> wrong;
    for (const auto& [group, login] : login_) {
      for (State s : kStates) {
        const Made m = make(s);
        const std::string before = row(m.key);
        for (const char* to : {"PROCESSING", "SUCCESS", "FAILED", "UNKNOWN"}) {
          const std::string got =
              callAs(group, std::string("UPDATE idem.records SET status = '") + to +
                                "' WHERE idempotency_key = '" + m.key + "'");
          if (got != "42501")
            wrong.push_back(group + " UPDATE " + name(s) + " -> " + to + ": " + got);
          // Forging the actor does not help either: the table stays closed.
          const std::string forged = callAs(group, "SELECT idem.act('operator', 'forged', '')");
          if (forged != "42501") wrong.push_back(group + " could call idem.act");
        }
        if (row(m.key) != before) wrong.push_back(group + " changed " + name(s));
      }
    }
    QVERIFY2(wrong.empty(), wrong.empty() ? "" : wrong.front().c_str());
  }

  // The owner has the rights; the trigger still allows only the system's rows of the table to a
  // direct UPDATE (one that names no actor), and only under the row's conditions.
  void ownerDirectUpdatesMeetTheTrigger() {
    // The direct UPDATEs the trigger lets through; it refuses every other one.
    const std::set<std::pair<State, std::string>> allowed{
        {State::Processing, "SUCCESS"},       {State::Processing, "FAILED"},
        {State::Processing, "UNKNOWN"},       {State::ProcessingExpired, "SUCCESS"},
        {State::ProcessingExpired, "FAILED"}, {State::ProcessingExpired, "UNKNOWN"},
        {State::Unknown, "SUCCESS"},          {State::FailedRetryable, "PROCESSING"},
    };
    std::vector<std::string> wrong;
    for (State s : kStates) {
      for (const char* to : {"PROCESSING", "SUCCESS", "FAILED", "UNKNOWN"}) {
        const Made m = make(s);
        if (text("SELECT status FROM idem.records WHERE idempotency_key = '" + m.key + "'") == to)
          continue;  // not a transition
        const std::string before = row(m.key);
        std::string sqlstate;
        try {
          translatingErrors("update", [&] {
            pqxx::nontransaction tx(*owner_);
            tx.exec(std::string("UPDATE idem.records SET status = '") + to +
                    "' WHERE idempotency_key = '" + m.key + "'");
          });
        } catch (const DatabaseError& e) {
          sqlstate = e.sqlstate();
        }
        const std::string label = std::string(name(s)) + " -> " + to;
        if (allowed.contains({s, to})) {
          if (!sqlstate.empty())
            wrong.push_back(label + " refused: " + sqlstate);
          else if (text("SELECT reason FROM idem.transitions WHERE idempotency_key = '" + m.key +
                        "' ORDER BY id DESC LIMIT 1") !=
                   "direct UPDATE outside the protocol functions") {
            wrong.push_back(label + " left no history naming the direct UPDATE");
          }
        } else {
          if (sqlstate != "23514")
            wrong.push_back(label + " not refused by the trigger: '" + sqlstate + "'");
          if (row(m.key) != before) wrong.push_back(label + " changed the record");
        }
      }
    }
    QVERIFY2(wrong.empty(),
             wrong.empty()
                 ? ""
                 : (std::to_string(wrong.size()) + " wrong, first: " + wrong.front()).c_str());
  }
};

QTEST_GUILESS_MAIN(TestStateMachine)
#include "tst_state_machine.moc"

// The state machine of schema contract v2, role by role: every call each role may make on a record
// in every state, with the result code the contract gives it (and the record unchanged whenever it
// is refused); every function a role may not call refused by PostgreSQL (42501); and every direct
// UPDATE of a status refused for every role (42501), and for the owner by the trigger unless the
// table allows it.
#include <QtTest>

#include "idem/database_error.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"

using namespace idem;

namespace {

// The states a record can be found in, as far as the v2 table tells them apart.
enum class State { Processing, ProcessingExpired, Unknown, Success, FailedFinal, FailedRetryable };
constexpr State kStates[] = {State::Processing, State::ProcessingExpired, State::Unknown,
                             State::Success,    State::FailedFinal,       State::FailedRetryable};

const char* name(State s) {
  switch (s) {
    case State::Processing:
      return "PROCESSING";
    case State::ProcessingExpired:
      return "PROCESSING-past-lease";
    case State::Unknown:
      return "UNKNOWN";
    case State::Success:
      return "SUCCESS";
    case State::FailedFinal:
      return "FAILED-final";
    case State::FailedRetryable:
      return "FAILED-retryable";
  }
  return "?";
}

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
    BeginRequest r;
    r.key = m.key;
    r.bizType = "payment";
    r.bizId = "order-" + m.key;
    r.tool = "pay";
    r.lease = s == State::Processing ? std::chrono::milliseconds(3'600'000)
                                     : std::chrono::milliseconds(1);
    const BeginResult b = p.begin(r);
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

  struct Call {
    const char* label;
    std::string (*sql)(const Made&);
    std::map<State, std::string> expected;  // result code per state
  };

  // Every call of `calls` as `group` on a fresh record in every state.
  void check(const std::string& group, const std::vector<Call>& calls) {
    std::vector<std::string> wrong;
    for (const Call& call : calls) {
      for (State s : kStates) {
        const Made m = make(s);
        const std::string before = row(m.key);
        const std::string got = callAs(group, call.sql(m));
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
    pqxx::connection c(test::TestDatabase::serverDsn());
    pqxx::nontransaction tx(c);
    for (const auto& [group, login] : login_)
      tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(login));
  }

  // The claimant's answers, with its token. UNKNOWN -> FAILED is gone in v2.
  void writerAnswersAsTheClaimantOnly() {
    const std::string inv = "invalid_transition";
    check("idem_writer",
          {
              {"complete",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version) + ", '{}', '" + m.token + "')";
               },
               {{State::Processing, "ok"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, "ok"},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"fail",
               [](const Made& m) {
                 return "SELECT result FROM idem.fail('" + m.key + "', " +
                        std::to_string(m.version) + ", 'x', '" + m.token + "')";
               },
               {{State::Processing, "ok"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, inv},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"fail retry_allowed",
               [](const Made& m) {
                 return "SELECT result FROM idem.fail('" + m.key + "', " +
                        std::to_string(m.version) + ", 'x', '" + m.token + "', true)";
               },
               {{State::Processing, "ok"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, inv},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"mark_unknown",
               [](const Made& m) {
                 return "SELECT result FROM idem.mark_unknown('" + m.key + "', " +
                        std::to_string(m.version) + ", 'x', '" + m.token + "')";
               },
               {{State::Processing, "ok"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, inv},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"complete without the token",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version) + ", '{}', gen_random_uuid())";
               },
               all("not_claimant")},
              {"fail without the token",
               [](const Made& m) {
                 return "SELECT result FROM idem.fail('" + m.key + "', " +
                        std::to_string(m.version) + ", 'x', NULL, true)";
               },
               all("not_claimant")},
              {"complete with a stale version",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version + 1) + ", '{}', '" + m.token + "')";
               },
               all("conflict")},
              {"settle",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r')";
               },
               all("42501")},
              {"resolve",
               [](const Made& m) {
                 return "SELECT result FROM idem.resolve('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r', '{\"e\": 1}')";
               },
               all("42501")},
              {"reconcile", [](const Made&) { return std::string("SELECT idem.reconcile()"); },
               all("42501")},
          });
  }

  // settle: past the lease only; FAILED -> SUCCESS is a correction; SUCCESS is final.
  void operatorSettlesOnlyWhatTheTableAllows() {
    const std::string inv = "invalid_transition";
    check("idem_operator",
          {
              {"settle SUCCESS",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'statement line')";
               },
               {{State::Processing, "lease_active"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, "ok"},
                {State::Success, inv},
                {State::FailedFinal, "ok"},
                {State::FailedRetryable, "ok"}}},
              {"settle FAILED",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version) + ", 'FAILED', 'no such payment')";
               },
               {{State::Processing, "lease_active"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, "ok"},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"settle stale version",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version + 1) + ", 'SUCCESS', 'stale')";
               },
               all("conflict")},
              {"complete",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version) + ", '{}', '" + m.token + "')";
               },
               all("42501")},
              {"resolve",
               [](const Made& m) {
                 return "SELECT result FROM idem.resolve('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r', '{\"e\": 1}')";
               },
               all("42501")},
              {"begin",
               [](const Made& m) {
                 return "SELECT outcome FROM idem.begin('" + m.key + "', 'payment', 'order-" +
                        m.key + "', 'pay', NULL, 'initial', '{}')";
               },
               all("42501")},
          });
  }

  // resolve: UNKNOWN or past the lease, never a FAILED or SUCCESS record.
  void reconcilerResolvesOnlyWhatTheTableAllows() {
    const std::string inv = "invalid_transition";
    check("idem_reconciler",
          {
              {"resolve SUCCESS",
               [](const Made& m) {
                 return "SELECT result FROM idem.resolve('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'lookup', '{\"gw\": \"paid\"}')";
               },
               {{State::Processing, "lease_active"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, "ok"},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"resolve FAILED",
               [](const Made& m) {
                 return "SELECT result FROM idem.resolve('" + m.key + "', " +
                        std::to_string(m.version) + ", 'FAILED', 'lookup', '{\"gw\": \"none\"}')";
               },
               {{State::Processing, "lease_active"},
                {State::ProcessingExpired, "ok"},
                {State::Unknown, "ok"},
                {State::Success, inv},
                {State::FailedFinal, inv},
                {State::FailedRetryable, inv}}},
              {"settle",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r')";
               },
               all("42501")},
              {"complete",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version) + ", '{}', '" + m.token + "')";
               },
               all("42501")},
              {"fail",
               [](const Made& m) {
                 return "SELECT result FROM idem.fail('" + m.key + "', " +
                        std::to_string(m.version) + ", 'x', '" + m.token + "')";
               },
               all("42501")},
          });
  }

  void readerChangesNothing() {
    check("idem_reader",
          {
              {"complete",
               [](const Made& m) {
                 return "SELECT result FROM idem.complete('" + m.key + "', " +
                        std::to_string(m.version) + ", '{}', '" + m.token + "')";
               },
               all("42501")},
              {"settle",
               [](const Made& m) {
                 return "SELECT result FROM idem.settle('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r')";
               },
               all("42501")},
              {"resolve",
               [](const Made& m) {
                 return "SELECT result FROM idem.resolve('" + m.key + "', " +
                        std::to_string(m.version) + ", 'SUCCESS', 'r', '{\"e\": 1}')";
               },
               all("42501")},
              {"reconcile", [](const Made&) { return std::string("SELECT idem.reconcile()"); },
               all("42501")},
          });
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
    const std::map<State, std::map<std::string, bool>> allowed{
        {State::Processing,
         {{"SUCCESS", true}, {"FAILED", true}, {"UNKNOWN", true}, {"PROCESSING", false}}},
        {State::ProcessingExpired,
         {{"SUCCESS", true}, {"FAILED", true}, {"UNKNOWN", true}, {"PROCESSING", false}}},
        {State::Unknown,
         {{"SUCCESS", true}, {"FAILED", false}, {"UNKNOWN", false}, {"PROCESSING", false}}},
        {State::Success,
         {{"SUCCESS", false}, {"FAILED", false}, {"UNKNOWN", false}, {"PROCESSING", false}}},
        {State::FailedFinal,
         {{"SUCCESS", false}, {"FAILED", false}, {"UNKNOWN", false}, {"PROCESSING", false}}},
        {State::FailedRetryable,
         {{"SUCCESS", false}, {"FAILED", false}, {"UNKNOWN", false}, {"PROCESSING", true}}},
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
        if (allowed.at(s).at(to)) {
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

// Every transaction idemwatch opens goes through here, so that its statement timeout is set for
// that transaction alone (SET LOCAL), never at connect (PgBouncer refuses `options`) and never for
// the session: behind a pooler in transaction mode a session setting stays on the server
// connection and leaks to whichever client gets it next.
//
// The timeout belongs to whoever owns the connection, and a libpq connection is owned by one
// thread (the exporter's collection thread, the admin app's worker, idemctl's main thread): the
// owner states it once with a StatementTimeoutScope, and the transactions that thread opens obey.
#pragma once

#include <chrono>
#include <pqxx/nontransaction>
#include <pqxx/transaction>
#include <type_traits>
#include <utility>

namespace idem {

// The statement timeout of the transactions this thread opens while the scope lives (0: the
// server's default). Scopes nest; the previous value comes back at the end.
class StatementTimeoutScope {
 public:
  explicit StatementTimeoutScope(std::chrono::milliseconds timeout);
  ~StatementTimeoutScope();
  StatementTimeoutScope(const StatementTimeoutScope&) = delete;
  StatementTimeoutScope& operator=(const StatementTimeoutScope&) = delete;

 private:
  std::chrono::milliseconds previous_;
};

std::chrono::milliseconds currentStatementTimeout();

// SET LOCAL statement_timeout, when this thread has one. A dbtransaction only: in a
// nontransaction every statement is its own implicit transaction, so a SET LOCAL there would end
// with itself and bound nothing (PostgreSQL only warns).
void applyTimeouts(pqxx::dbtransaction& tx);

// A pqxx::transaction that applies the timeouts as it begins.
template <pqxx::isolation_level Isolation = pqxx::read_committed,
          pqxx::readwrite_policy ReadWrite = pqxx::read_write>
class BoundedTransaction : public pqxx::transaction<Isolation, ReadWrite> {
 public:
  // namedclass is libpqxx's virtual base, so the most derived class names it.
  explicit BoundedTransaction(pqxx::connection_base& connection)
      : pqxx::internal::namedclass{"BoundedTransaction"},
        pqxx::transaction<Isolation, ReadWrite>(connection) {
    applyTimeouts(*this);
  }
};

using Work = BoundedTransaction<>;
using ReadTransaction = BoundedTransaction<pqxx::read_committed, pqxx::read_only>;
// One snapshot for every statement: for reads that must agree with each other.
using SnapshotRead = BoundedTransaction<pqxx::repeatable_read, pqxx::read_only>;

// One self-contained call (a protocol function, a single read) under this thread's timeout.
// Without one, a nontransaction: one round trip, as the protocol's callers expect. With one, a
// transaction carrying SET LOCAL, since a nontransaction cannot carry it (see applyTimeouts).
template <typename Call>
auto boundedCall(pqxx::connection_base& connection, Call&& call) {
  if (currentStatementTimeout().count() <= 0) {
    pqxx::nontransaction tx(connection);
    return std::forward<Call>(call)(static_cast<pqxx::transaction_base&>(tx));
  }
  Work tx(connection);
  if constexpr (std::is_void_v<decltype(call(std::declval<pqxx::transaction_base&>()))>) {
    std::forward<Call>(call)(static_cast<pqxx::transaction_base&>(tx));
    tx.commit();
  } else {
    auto result = std::forward<Call>(call)(static_cast<pqxx::transaction_base&>(tx));
    tx.commit();
    return result;
  }
}

}  // namespace idem

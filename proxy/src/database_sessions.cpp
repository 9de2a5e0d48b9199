#include "database_sessions.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>

#include "idem/database_error.hpp"
#include "idem/serialization_retry.hpp"

namespace idem::proxy {

namespace net = boost::asio;
using net::awaitable;
using net::use_awaitable;

namespace {

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ClearResult>;

std::string lost(const ProtocolStatement& statement, PGconn* conn) {
  return std::string(statement.what) + ": lost the database connection (" +
         primaryMessage(PQerrorMessage(conn)) + ")";
}

}  // namespace

struct DatabaseSessions::Session {
  PGconn* conn = nullptr;
  std::optional<net::posix::stream_descriptor> socket;

  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    // The descriptor is libpq's: PQfinish closes it.
    if (socket) socket->release();
    if (conn != nullptr) PQfinish(conn);
  }
  bool healthy() const { return conn != nullptr && PQstatus(conn) == CONNECTION_OK; }
  // The claim's statements were prepared on this session when it opened.
  bool prepared = false;

  // An idle session has nothing to read unless the server ended it (a restart, a terminated
  // backend, an idle timeout): its last words (FATAL) and the end of the stream. It is then closed
  // before a call is sent on it, and the call goes to another session instead of failing: nothing
  // was sent, so nothing can have run.
  bool endedWhileIdle() {
    for (int reads = 0; reads < 4 && !ended && PQstatus(conn) == CONNECTION_OK; ++reads) {
      pollfd readable{PQsocket(conn), POLLIN, 0};
      if (::poll(&readable, 1, 0) <= 0) break;
      if (PQconsumeInput(conn) == 0) return true;
      PQisBusy(conn);  // parses what arrived: the notice receiver sees a FATAL
    }
    return ended || PQstatus(conn) != CONNECTION_OK;
  }

  // What the server says outside a statement's answer reaches the proxy's log; a FATAL or PANIC
  // means this backend is ending.
  static void noticed(void* self, const PGresult* notice) {
    const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
    const std::string level = severity != nullptr ? severity : "";
    if (level == "FATAL" || level == "PANIC") static_cast<Session*>(self)->ended = true;
    std::cerr << "idemwatch-proxy: the database says (" << level
              << "): " << primaryMessage(PQresultErrorMessage(notice)) << '\n';
  }

  bool ended = false;
};

// A call waiting for a session: give() hands it one with its statement already sent (the session
// goes from one call to the next without waiting for the waiter's turn on the event loop), or the
// right to open one, and wakes it.
struct DatabaseSessions::Waiter {
  net::steady_timer wake;
  const ProtocolStatement* statement;
  std::chrono::steady_clock::time_point* sentAt;
  std::unique_ptr<Session> session;
  bool mayOpen = false;
};

namespace {

// Writes the statement into libpq's buffer (sent by receive's flush, or at once when it fits), as
// the session's prepared statement when `prepared`; false when the session is broken.
bool send(PGconn* conn, bool prepared, const ProtocolStatement& statement,
          std::chrono::steady_clock::time_point* sentAt) {
  std::vector<const char*> values;
  values.reserve(statement.parameters.size());
  for (const auto& p : statement.parameters) values.push_back(p ? p->c_str() : nullptr);
  if (sentAt != nullptr) *sentAt = std::chrono::steady_clock::now();
  const int count = static_cast<int>(values.size());
  if (prepared) {
    return PQsendQueryPrepared(conn, preparedName(statement).c_str(), count, values.data(), nullptr,
                               nullptr, 0) != 0;
  }
  return PQsendQueryParams(conn, statement.sql, count, nullptr, values.data(), nullptr, nullptr,
                           0) != 0;
}

}  // namespace

namespace {

struct Opened {
  PGconn* conn = nullptr;
  bool shared = false;    // a pooler stands in between
  bool prepared = false;  // the claim's statements are prepared on the session
};

// Whether a pooler stands in between: it answers the startup itself with a backend key of its own
// making, so the pid the client was told is not the server's (idem::sessionIsShared).
bool sharedSession(PGconn* conn) {
  const Result r(PQexec(conn, "SELECT pg_catalog.pg_backend_pid()"));
  return r && PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1 &&
         std::string(PQgetvalue(r.get(), 0, 0)) != std::to_string(PQbackendPID(conn));
}

// Connects and, when `prepare` and the session is the server's own, prepares the claim's
// statements; a session that cannot keep them sends unnamed ones.
awaitable<Opened> connectBlocking(std::string dsn, bool prepare) {
  Opened opened{PQconnectdb(dsn.c_str())};
  if (opened.conn == nullptr || PQstatus(opened.conn) != CONNECTION_OK || !prepare)
    co_return opened;
  opened.shared = sharedSession(opened.conn);
  if (opened.shared) co_return opened;
  opened.prepared = true;
  for (const ProtocolStatement& statement : claimStatements()) {
    const Result r(
        PQprepare(opened.conn, preparedName(statement).c_str(), statement.sql, 0, nullptr));
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      opened.prepared = false;
      break;
    }
  }
  co_return opened;
}

}  // namespace

DatabaseSessions::DatabaseSessions(net::any_io_executor executor, std::string dsn, int size)
    : executor_(std::move(executor)), dsn_(std::move(dsn)), size_(size) {}

DatabaseSessions::~DatabaseSessions() = default;

void DatabaseSessions::close() {
  connector_.stop();
  connector_.join();
  closed_ = true;
  opened_ -= static_cast<int>(idle_.size());
  idle_.clear();
}

awaitable<std::unique_ptr<DatabaseSessions::Session>> DatabaseSessions::open() {
  const Opened opened =
      co_await net::co_spawn(connector_, connectBlocking(dsn_, prepared_), use_awaitable);
  PGconn* conn = opened.conn;
  auto session = std::make_unique<Session>();
  session->conn = conn;
  session->prepared = opened.prepared;
  if (opened.shared) prepared_ = false;  // no session of this DSN keeps prepared statements
  if (conn == nullptr) throw DatabaseUnavailable("cannot connect to the database: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    throw DatabaseUnavailable("cannot connect to the database: " +
                              primaryMessage(PQerrorMessage(conn)));
  }
  if (PQsetnonblocking(conn, 1) != 0) {
    throw DatabaseUnavailable("cannot use the database session without blocking: " +
                              primaryMessage(PQerrorMessage(conn)));
  }
  PQsetNoticeReceiver(conn, &Session::noticed, session.get());
  session->socket.emplace(executor_, PQsocket(conn));
  co_return session;
}

awaitable<std::unique_ptr<DatabaseSessions::Session>> DatabaseSessions::take(
    const ProtocolStatement& statement, std::chrono::steady_clock::time_point* sentAt, bool& sent) {
  sent = false;
  if (closed_) throw DatabaseUnavailable("the proxy is stopping");
  while (!idle_.empty()) {
    auto session = std::move(idle_.back());
    idle_.pop_back();
    if (!session->endedWhileIdle()) co_return session;
    --opened_;
  }
  bool mayOpen = opened_ < size_;
  if (mayOpen) {
    ++opened_;
  } else {
    Waiter waiter{net::steady_timer(executor_, std::chrono::steady_clock::time_point::max()),
                  &statement,
                  sentAt,
                  {},
                  false};
    waiters_.push_back(&waiter);
    boost::system::error_code ec;
    co_await waiter.wake.async_wait(net::redirect_error(use_awaitable, ec));
    if (waiter.session) {
      sent = true;
      co_return std::move(waiter.session);
    }
    mayOpen = waiter.mayOpen;
    if (!mayOpen) throw DatabaseUnavailable("the proxy is stopping");
  }
  std::unique_ptr<Session> session;
  std::exception_ptr failed;
  try {
    session = co_await open();
  } catch (...) {
    failed = std::current_exception();
  }
  if (failed) {
    give(nullptr);  // the slot is free again: the next waiter tries
    std::rethrow_exception(failed);
  }
  co_return session;
}

void DatabaseSessions::give(std::unique_ptr<Session> session) {
  if (session && (closed_ || !session->healthy())) session.reset();
  if (!waiters_.empty()) {
    Waiter* next = waiters_.front();
    waiters_.pop_front();
    if (session &&
        !send(session->conn, session->prepared && prepared_, *next->statement, next->sentAt)) {
      session.reset();
    }
    if (!session) --opened_;
    if (session) {
      next->session = std::move(session);
    } else {
      next->mayOpen = !closed_;
      if (next->mayOpen) ++opened_;
    }
    next->wake.cancel();
    return;
  }
  if (!session) --opened_;
  if (session) idle_.push_back(std::move(session));
}

awaitable<Row> DatabaseSessions::receive(Session& session, const ProtocolStatement& statement) {
  PGconn* conn = session.conn;
  boost::system::error_code ec;
  for (int flushed = PQflush(conn); flushed != 0; flushed = PQflush(conn)) {
    if (flushed < 0) throw DatabaseUnavailable(lost(statement, conn));
    co_await session.socket->async_wait(net::posix::descriptor_base::wait_write,
                                        net::redirect_error(use_awaitable, ec));
    if (ec) throw DatabaseUnavailable(std::string(statement.what) + ": " + ec.message());
  }
  Result first;
  for (;;) {
    while (PQisBusy(conn) != 0) {
      co_await session.socket->async_wait(net::posix::descriptor_base::wait_read,
                                          net::redirect_error(use_awaitable, ec));
      if (ec) throw DatabaseUnavailable(std::string(statement.what) + ": " + ec.message());
      if (PQconsumeInput(conn) == 0) throw DatabaseUnavailable(lost(statement, conn));
    }
    Result next(PQgetResult(conn));
    if (!next) break;
    if (!first) first = std::move(next);
  }
  if (!first || PQstatus(conn) != CONNECTION_OK) throw DatabaseUnavailable(lost(statement, conn));
  const ExecStatusType status = PQresultStatus(first.get());
  if (status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR) {
    const char* sqlstate = PQresultErrorField(first.get(), PG_DIAG_SQLSTATE);
    const char* routine = PQresultErrorField(first.get(), PG_DIAG_SOURCE_FUNCTION);
    throw serverError(statement.what, sqlstate != nullptr ? sqlstate : "",
                      PQresultErrorMessage(first.get()), routine != nullptr ? routine : "");
  }
  if (status != PGRES_TUPLES_OK || PQntuples(first.get()) != 1) {
    throw DatabaseError("", std::string(statement.what) +
                                ": expected one row, the server answered " + PQresStatus(status) +
                                " with " + std::to_string(PQntuples(first.get())) + " rows");
  }
  Row row;
  const int fields = PQnfields(first.get());
  row.reserve(static_cast<std::size_t>(fields));
  for (int i = 0; i < fields; ++i) {
    if (PQgetisnull(first.get(), 0, i) != 0) {
      row.emplace_back();
    } else {
      row.emplace_back(std::string(PQgetvalue(first.get(), 0, i),
                                   static_cast<std::size_t>(PQgetlength(first.get(), 0, i))));
    }
  }
  co_return row;
}

awaitable<Row> DatabaseSessions::query(const ProtocolStatement& statement,
                                       std::chrono::steady_clock::time_point* sentAt) {
  for (int attempt = 1;; ++attempt) {
    bool sent = false;
    std::unique_ptr<Session> session = co_await take(statement, sentAt, sent);
    std::exception_ptr failed;
    bool transient = false;
    bool broken = false;
    bool lostPrepared = false;
    try {
      if (!sent && !send(session->conn, session->prepared && prepared_, statement, sentAt)) {
        throw DatabaseUnavailable(lost(statement, session->conn));
      }
      Row row = co_await receive(*session, statement);
      give(std::move(session));
      co_return row;
    } catch (const DatabaseError& e) {
      failed = std::current_exception();
      transient = runsAgain(e.sqlstate()) && attempt < kSerializationRetries;
      if (preparedStatementLost(e)) {
        // Nothing ran (only a prepared statement is answered so). Sessions do not keep them
        // here: unnamed ones from now on, this call's too, whichever call found out first.
        if (prepared_) {
          std::cerr << "idemwatch-proxy: the database session lost its prepared statement ("
                    << e.what()
                    << "); a pooler in transaction mode? Sending unnamed statements from now on\n";
        }
        prepared_ = false;
        lostPrepared = true;
      }
    } catch (...) {
      failed = std::current_exception();
      broken = true;
    }
    // A session whose call broke off is closed (an answer may still be on its way); one whose
    // call the server refused is ready for the next call.
    if (broken) session.reset();
    give(std::move(session));
    if (lostPrepared) {
      --attempt;
      continue;
    }
    if (!transient) std::rethrow_exception(failed);
    net::steady_timer pause(executor_, pauseBeforeRetry(attempt));
    co_await pause.async_wait(use_awaitable);
  }
}

}  // namespace idem::proxy

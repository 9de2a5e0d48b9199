// The proxy's database sessions, spoken to with libpq's asynchronous API on the proxy's own event
// loop: a protocol call is sent, and the loop serves other connections until the socket has its
// answer. No thread hand-off on the way there or back, and a slow database holds up only the
// requests waiting for it.
//
// At most `size` sessions, opened when first needed. A call waits for a free one, first come
// first served; the most recently returned is lent first, so at low concurrency one warm backend
// serves call after call (its caches hot, no idle backend woken). A session that broke is closed;
// the next call opens a new one.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "idem/protocol_client.hpp"

namespace idem::proxy {

// The database is out of reach (down, refused, a broken session): whatever the call was, the
// proxy cannot tell that it ran.
struct DatabaseUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The one row a statement answered: each field's text, nullopt for NULL.
using Row = std::vector<std::optional<std::string>>;

class DatabaseSessions {
 public:
  DatabaseSessions(boost::asio::any_io_executor executor, std::string dsn, int size);
  ~DatabaseSessions();
  DatabaseSessions(const DatabaseSessions&) = delete;
  DatabaseSessions& operator=(const DatabaseSessions&) = delete;

  // Runs one protocol statement in its own implicit transaction and answers its one row, as a
  // statement each session prepared when it opened (planned once a session, not once a call) until
  // the server shows that sessions do not keep them (a pooler in transaction mode), then unnamed.
  // A serialization failure or a deadlock changed nothing: the statement runs again (as
  // ProtocolClient does, up to kSerializationRetries times, after a growing pause); so does a call
  // whose prepared statement the server did not have. `sentAt`, when
  // given, is set as the statement's last attempt is written to the server.
  // Throws DatabaseUnavailable (no session could be had, or it broke during the call) or
  // DatabaseError (the server refused the statement). The statement must outlive the call.
  boost::asio::awaitable<Row> query(const ProtocolStatement& statement,
                                    std::chrono::steady_clock::time_point* sentAt = nullptr);

  // Whether sessions send a claim's calls as prepared statements (see query).
  bool prepared() const { return prepared_; }

  // After the event loop stopped: closes every idle session and waits for a connect under way.
  // Sessions in use close when given back.
  void close();

 private:
  struct Session;
  struct Waiter;

  // A session for `statement`; `sent` says whether the statement was already sent on it (a session
  // handed over by give() to a call that waited for one).
  boost::asio::awaitable<std::unique_ptr<Session>> take(
      const ProtocolStatement& statement, std::chrono::steady_clock::time_point* sentAt,
      bool& sent);
  void give(std::unique_ptr<Session> session);
  boost::asio::awaitable<std::unique_ptr<Session>> open();
  boost::asio::awaitable<Row> receive(Session& session, const ProtocolStatement& statement);

  boost::asio::any_io_executor executor_;
  std::string dsn_;
  int size_;
  int opened_ = 0;  // sessions open or being opened, idle or lent
  bool closed_ = false;
  // Whether sessions prepare the claim's statements: until one was found missing.
  bool prepared_ = true;
  std::vector<std::unique_ptr<Session>> idle_;
  std::deque<Waiter*> waiters_;
  // Connecting is libpq's blocking PQconnectdb on this helper thread: it happens once a session,
  // not once a call, and libpq then keeps the DSN's connect_timeout, hosts and SSL negotiation.
  boost::asio::thread_pool connector_{1};
};

}  // namespace idem::proxy

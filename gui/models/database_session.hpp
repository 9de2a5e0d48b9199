// The GUI thread's handle on the database: starts the worker thread, hands it requests and brings
// their replies back, and tracks the connection's state for the status bar. Calling it never
// blocks; nothing here touches the connection.
//
// A database operation is one submit() call: the work (a function of the worker's connection, run
// on the worker thread), what to do with its result and what to do with its error, both called on
// the requester's thread. Whether a reply still has a taker is decided in one place (deliver), by
// the requester's RequestTracker; no consumer filters replies.
#pragma once

#include <QDeadlineTimer>
#include <QObject>
#include <QThread>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/connection>
#include <type_traits>

#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/request_tracker.hpp"
#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseWorker;

enum class ConnectionState { Closed, Connecting, Connected, Disconnected };

// A failed request, classified once (idem::DatabaseError::kind()); when it endsSession() the
// worker is already reconnecting.
using RequestError = idem::DatabaseError;
using ErrorHandler = std::function<void(const RequestError&)>;

class DatabaseSession : public QObject {
  Q_OBJECT

 public:
  explicit DatabaseSession(QObject* parent = nullptr);
  // Stops the worker thread; waits for a running statement (bounded by the statement timeout).
  ~DatabaseSession() override;

  // application_name "idemwatch-admin" (so a DBA can tell the console's sessions apart) and a
  // statement timeout, unless the settings say otherwise.
  static idem::ConnectionSettings withAdminDefaults(idem::ConnectionSettings settings);

  void open(const idem::ConnectionSettings& settings,
            ReconnectBackoff backoff = ReconnectBackoff());
  void close();

  ConnectionState state() const { return state_; }
  bool isConnected() const { return state_ == ConnectionState::Connected; }
  const ConnectionInfo& info() const { return info_; }
  const QString& lastError() const { return lastError_; }
  // When the worker tries again; empty when it is not going to.
  std::optional<QDeadlineTimer> nextRetry() const { return nextRetry_; }
  QString describeTarget() const;  // the redacted DSN

  // Runs work(connection) on the worker thread and hands its result to onReply, or its error to
  // onError, on the session's thread (the requester's: every model and widget lives there), unless
  // tracker's requester is gone or has asked again since. `what` opens the error messages
  // ("read records: ..."). The request supersedes the tracker's earlier ones.
  template <typename Work, typename OnReply>
  void submit(RequestTracker& tracker, const char* what, Work work, OnReply onReply,
              ErrorHandler onError = {});

 signals:
  void stateChanged(idem::admin::ConnectionState state);
  void connected(const idem::admin::ConnectionInfo& info);
  // retryInMs < 0: not retrying (closed, or the server wants a password it was not given).
  void disconnected(const QString& message, int retryInMs, bool needsPassword);
  // Every request ends here once: delivered to its requester, or dropped (skipped as stale
  // before it ran, or its reply superseded or orphaned). For the status bar, the benchmark and the
  // tests.
  void requestEnded(bool delivered);

 private:
  void setState(ConnectionState state);
  void post(const RequestTracker::Request& request, const char* what,
            std::function<void(pqxx::connection&)> work, ErrorHandler onError);
  // The one place a reply is delivered or dropped; called on the worker thread.
  void deliver(const RequestTracker::Request& request, std::function<void()> reply);

  QThread thread_;
  DatabaseWorker* worker_;  // lives on thread_, deleted there
  ConnectionState state_ = ConnectionState::Closed;
  ConnectionInfo info_;
  QString lastError_;
  std::optional<QDeadlineTimer> nextRetry_;
  std::optional<idem::ConnectionSettings> settings_;
};

template <typename Work, typename OnReply>
void DatabaseSession::submit(RequestTracker& tracker, const char* what, Work work, OnReply onReply,
                             ErrorHandler onError) {
  using Result = std::invoke_result_t<const Work&, pqxx::connection&>;
  const RequestTracker::Request request = tracker.start();
  post(
      request, what,
      [this, request, work = std::move(work), onReply = std::move(onReply)](pqxx::connection& c) {
        // Shared, so the result crosses the thread boundary without a copy.
        auto result = std::make_shared<const Result>(work(c));
        deliver(request, [onReply, result] { onReply(*result); });
      },
      std::move(onError));
}

}  // namespace idem::admin

Q_DECLARE_METATYPE(idem::admin::ConnectionState)

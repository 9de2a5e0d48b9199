// The only place the admin app talks to PostgreSQL. A DatabaseWorker lives on its own QThread and
// owns the connection (a libpq connection must never be used from two threads); DatabaseSession
// hands it requests as queued calls of run(), and it never touches a widget or a model.
//
// When the connection drops, the request that noticed fails as ConnectionLost, the worker says
// "disconnected, retrying in N ms" and reconnects on a backoff timer of its own thread.
#pragma once

#include <QObject>
#include <QTimer>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/connection>
#include <string>

#include "idem/connection_settings.hpp"
#include "idem/database_error.hpp"
#include "idem/settlement.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"
#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseWorker : public QObject {
  Q_OBJECT

 public:
  explicit DatabaseWorker(QObject* parent = nullptr);
  ~DatabaseWorker() override;

  // Everything below runs on the worker's thread.
  void open(const idem::ConnectionSettings& settings, ReconnectBackoff backoff);
  void close();

  // work(connection), or fail(why) with the error classified; false when the request was skipped
  // as superseded. A failure that ends the session also starts the reconnect.
  bool run(const RequestTracker::Request& request, const char* what,
           const std::function<void(pqxx::connection&)>& work,
           const std::function<void(const idem::DatabaseError&)>& fail);

 signals:
  void connected(const idem::admin::ConnectionInfo& info);
  // retryInMs < 0: not retrying (closed, or a password is needed).
  void disconnected(const QString& message, int retryInMs, bool needsPassword);

 private:
  void connectNow();
  void loseConnection(const QString& message);
  ConnectionInfo describeConnection();

  std::unique_ptr<pqxx::connection> connection_;
  std::optional<idem::ConnectionSettings> settings_;
  ReconnectBackoff backoff_;
  QTimer* retryTimer_;
};

// What the console asks of the database, each a function of the worker's connection for
// DatabaseSession::submit.
RecordPage readPage(pqxx::connection& c, const RecordFilter& filter,
                    const std::optional<RecordCursor>& after, int limit);
// Re-reads the span through `through`; falls back to the first page when that span is empty.
RecordPage readWindow(pqxx::connection& c, const RecordFilter& filter, const RecordCursor& through,
                      int limit, int firstPageLimit);
RecordEvidence readEvidence(pqxx::connection& c, const std::string& key);
UnsettledCounts readCounts(pqxx::connection& c);
// overrideSideEffect: weigh the decision as if the override were ticked.
idem::SettleAssessment assess(pqxx::connection& c, const std::string& key, RecordStatus to,
                              bool overrideSideEffect);
// idem::settleRecord, the checked path shared with `idemctl settle`; a lost connection says that
// the decision may or may not have been written.
idem::SettleOutcome settle(pqxx::connection& c, const idem::SettleRequest& request);

}  // namespace idem::admin

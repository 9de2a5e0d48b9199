// The GUI thread's handle on the database: starts the worker thread, numbers the jobs, forwards
// requests to the worker as queued calls and its answers as signals, and tracks the connection's
// state for the status bar. Calling it never blocks; nothing here touches the connection.
#pragma once

#include <QDeadlineTimer>
#include <QObject>
#include <QThread>
#include <chrono>
#include <optional>

#include "idem/connection_settings.hpp"
#include "idem/settlement.hpp"
#include "models/job_ticket.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_filter.hpp"
#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseWorker;

enum class ConnectionState { Closed, Connecting, Connected, Disconnected };

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

  quint64 fetchPage(const JobTicket& ticket, const RecordFilter& filter,
                    const std::optional<RecordCursor>& after, int limit);
  quint64 fetchWindow(const JobTicket& ticket, const RecordFilter& filter,
                      const RecordCursor& through, int limit, int firstPageLimit);
  quint64 fetchEvidence(const JobTicket& ticket, const std::string& key);
  quint64 fetchCounts(const JobTicket& ticket);
  // overrideMoneyMoved: weigh the decision as if the override were ticked.
  quint64 assess(const JobTicket& ticket, const std::string& key, RecordStatus to,
                 bool overrideMoneyMoved = false);
  quint64 settle(const idem::SettleRequest& request);

  // A fresh job number (tickets are made from it and the requester's Generation).
  quint64 nextJob() { return ++lastJob_; }

 signals:
  void stateChanged(idem::admin::ConnectionState state);
  void connected(const idem::admin::ConnectionInfo& info);
  void disconnected(const QString& message, int retryInMs);
  void pageFetched(quint64 job, const idem::admin::RecordPage& page);
  void evidenceFetched(quint64 job, const idem::admin::RecordEvidence& evidence);
  void countsFetched(quint64 job, const idem::admin::UnsettledCounts& counts);
  void assessed(quint64 job, const idem::SettleAssessment& assessment);
  void settled(quint64 job, const idem::SettleOutcome& outcome);
  void jobFailed(quint64 job, const QString& message, bool connectionLost);
  void jobDropped(quint64 job);

 private:
  void setState(ConnectionState state);

  QThread thread_;
  DatabaseWorker* worker_;  // lives on thread_, deleted there
  ConnectionState state_ = ConnectionState::Closed;
  ConnectionInfo info_;
  QString lastError_;
  std::optional<QDeadlineTimer> nextRetry_;
  std::optional<idem::ConnectionSettings> settings_;
  quint64 lastJob_ = 0;
};

}  // namespace idem::admin

Q_DECLARE_METATYPE(idem::admin::ConnectionState)

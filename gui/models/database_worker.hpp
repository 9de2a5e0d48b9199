// The only place the admin app talks to PostgreSQL. A DatabaseWorker lives on its own QThread and
// owns the connection (a libpq connection must never be used from two threads); its entry points
// run on that thread, called by DatabaseSession through queued invocations, and answer through
// queued signals carrying the job number. It never touches a widget or a model.
//
// When the connection drops, the job that noticed fails with connectionLost, the worker says
// "disconnected, retrying in N ms" and reconnects on a backoff timer of its own thread.
#pragma once

#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>
#include <pqxx/connection>

#include "idem/connection_settings.hpp"
#include "idem/settlement.hpp"
#include "models/job_ticket.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_filter.hpp"
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

  void fetchPage(const JobTicket& ticket, const RecordFilter& filter,
                 const std::optional<RecordCursor>& after, int limit);
  // Re-reads the span through `through`; falls back to the first page when that span is empty.
  void fetchWindow(const JobTicket& ticket, const RecordFilter& filter, const RecordCursor& through,
                   int limit, int firstPageLimit);
  void fetchEvidence(const JobTicket& ticket, const std::string& key);
  void fetchCounts(const JobTicket& ticket);
  void assess(const JobTicket& ticket, const std::string& key, RecordStatus to,
              bool overrideMoneyMoved);
  // idem::settleRecord: the checked path shared with `idemctl settle`.
  void settle(const JobTicket& ticket, const idem::SettleRequest& request);

 signals:
  void connected(const idem::admin::ConnectionInfo& info);
  // retryInMs < 0: not retrying (closed, or a password is needed).
  void disconnected(const QString& message, int retryInMs);
  void pageFetched(quint64 job, const idem::admin::RecordPage& page);
  void evidenceFetched(quint64 job, const idem::admin::RecordEvidence& evidence);
  void countsFetched(quint64 job, const idem::admin::UnsettledCounts& counts);
  void assessed(quint64 job, const idem::SettleAssessment& assessment);
  void settled(quint64 job, const idem::SettleOutcome& outcome);
  void jobFailed(quint64 job, const QString& message, bool connectionLost);
  void jobDropped(quint64 job);

 private:
  template <typename Fn>
  void run(const JobTicket& ticket, const char* what, Fn&& fn);
  void connectNow();
  void loseConnection(const QString& message);
  ConnectionInfo describeConnection();

  std::unique_ptr<pqxx::connection> connection_;
  std::optional<idem::ConnectionSettings> settings_;
  ReconnectBackoff backoff_;
  QTimer* retryTimer_;
};

}  // namespace idem::admin

#include "models/database_session.hpp"

#include "models/database_worker.hpp"

namespace idem::admin {
namespace {

void registerReplyTypes() {
  qRegisterMetaType<idem::admin::RecordPage>();
  qRegisterMetaType<idem::admin::RecordEvidence>();
  qRegisterMetaType<idem::admin::UnsettledCounts>();
  qRegisterMetaType<idem::admin::ConnectionInfo>();
  qRegisterMetaType<idem::admin::ConnectionState>();
  qRegisterMetaType<idem::SettleAssessment>();
  qRegisterMetaType<idem::SettleOutcome>();
}

}  // namespace

DatabaseSession::DatabaseSession(QObject* parent) : QObject(parent), worker_(new DatabaseWorker) {
  registerReplyTypes();
  thread_.setObjectName(QStringLiteral("idemwatch-db"));
  worker_->moveToThread(&thread_);
  // The worker, and with it the connection, is destroyed on its own thread.
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);

  // Queued: the worker emits on its thread, these run on ours.
  const auto queued = Qt::QueuedConnection;
  connect(
      worker_, &DatabaseWorker::connected, this,
      [this](const ConnectionInfo& info) {
        info_ = info;
        lastError_.clear();
        nextRetry_.reset();
        setState(ConnectionState::Connected);
        emit connected(info);
      },
      queued);
  connect(
      worker_, &DatabaseWorker::disconnected, this,
      [this](const QString& message, int retryInMs) {
        if (!settings_) return;  // closed meanwhile
        lastError_ = message;
        if (retryInMs >= 0) {
          nextRetry_ = QDeadlineTimer(retryInMs);
        } else {
          nextRetry_.reset();
        }
        setState(ConnectionState::Disconnected);
        emit disconnected(message, retryInMs);
      },
      queued);
  connect(worker_, &DatabaseWorker::pageFetched, this, &DatabaseSession::pageFetched, queued);
  connect(worker_, &DatabaseWorker::evidenceFetched, this, &DatabaseSession::evidenceFetched,
          queued);
  connect(worker_, &DatabaseWorker::countsFetched, this, &DatabaseSession::countsFetched, queued);
  connect(worker_, &DatabaseWorker::assessed, this, &DatabaseSession::assessed, queued);
  connect(worker_, &DatabaseWorker::settled, this, &DatabaseSession::settled, queued);
  connect(worker_, &DatabaseWorker::jobFailed, this, &DatabaseSession::jobFailed, queued);
  connect(worker_, &DatabaseWorker::jobDropped, this, &DatabaseSession::jobDropped, queued);
  thread_.start();
}

DatabaseSession::~DatabaseSession() {
  thread_.quit();
  thread_.wait();
}

idem::ConnectionSettings DatabaseSession::withAdminDefaults(idem::ConnectionSettings settings) {
  if (settings.applicationName == "idemwatch") settings.applicationName = "idemwatch-admin";
  if (settings.statementTimeout.count() == 0) settings.statementTimeout = std::chrono::seconds(30);
  return settings;
}

void DatabaseSession::open(const idem::ConnectionSettings& settings, ReconnectBackoff backoff) {
  settings_ = settings;
  info_ = {};
  lastError_.clear();
  nextRetry_.reset();
  setState(ConnectionState::Connecting);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, settings, backoff] { w->open(settings, backoff); },
      Qt::QueuedConnection);
}

void DatabaseSession::close() {
  settings_.reset();
  nextRetry_.reset();
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->close(); }, Qt::QueuedConnection);
  setState(ConnectionState::Closed);
}

QString DatabaseSession::describeTarget() const {
  return settings_ ? QString::fromStdString(settings_->redacted()) : QString();
}

void DatabaseSession::setState(ConnectionState state) {
  if (state_ == state) return;
  state_ = state;
  emit stateChanged(state);
}

quint64 DatabaseSession::fetchPage(const JobTicket& ticket, const RecordFilter& filter,
                                   const std::optional<RecordCursor>& after, int limit) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, ticket, filter, after, limit] { w->fetchPage(ticket, filter, after, limit); },
      Qt::QueuedConnection);
  return ticket.job;
}

quint64 DatabaseSession::fetchWindow(const JobTicket& ticket, const RecordFilter& filter,
                                     const RecordCursor& through, int limit, int firstPageLimit) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, ticket, filter, through, limit, firstPageLimit] {
        w->fetchWindow(ticket, filter, through, limit, firstPageLimit);
      },
      Qt::QueuedConnection);
  return ticket.job;
}

quint64 DatabaseSession::fetchEvidence(const JobTicket& ticket, const std::string& key) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, ticket, key] { w->fetchEvidence(ticket, key); }, Qt::QueuedConnection);
  return ticket.job;
}

quint64 DatabaseSession::fetchCounts(const JobTicket& ticket) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, ticket] { w->fetchCounts(ticket); }, Qt::QueuedConnection);
  return ticket.job;
}

quint64 DatabaseSession::assess(const JobTicket& ticket, const std::string& key, RecordStatus to,
                                bool overrideMoneyMoved) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, ticket, key, to, overrideMoneyMoved] {
        w->assess(ticket, key, to, overrideMoneyMoved);
      },
      Qt::QueuedConnection);
  return ticket.job;
}

quint64 DatabaseSession::settle(const idem::SettleRequest& request) {
  const JobTicket ticket{nextJob(), 0, nullptr};
  QMetaObject::invokeMethod(
      worker_, [w = worker_, ticket, request] { w->settle(ticket, request); },
      Qt::QueuedConnection);
  return ticket.job;
}

}  // namespace idem::admin

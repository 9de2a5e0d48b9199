#include "models/database_session.hpp"

#include "models/database_worker.hpp"

namespace idem::admin {
namespace {

// Connection state crosses from the worker by queued signals; requests and replies travel as
// functions and need no registration.
void registerConnectionTypes() {
  qRegisterMetaType<idem::admin::ConnectionInfo>();
  qRegisterMetaType<idem::admin::ConnectionState>();
}

}  // namespace

DatabaseSession::DatabaseSession(QObject* parent) : QObject(parent), worker_(new DatabaseWorker) {
  registerConnectionTypes();
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
      [this](const QString& message, int retryInMs, bool needsPassword) {
        if (!settings_) return;  // closed meanwhile
        lastError_ = message;
        if (retryInMs >= 0) {
          nextRetry_ = QDeadlineTimer(retryInMs);
        } else {
          nextRetry_.reset();
        }
        setState(ConnectionState::Disconnected);
        emit disconnected(message, retryInMs, needsPassword);
      },
      queued);
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

void DatabaseSession::post(const RequestTracker::Request& request, const char* what,
                           std::function<void(pqxx::connection&)> work, ErrorHandler onError) {
  QMetaObject::invokeMethod(
      worker_,
      [this, w = worker_, request, what, work = std::move(work), onError = std::move(onError)] {
        const bool ran = w->run(request, what, work, [&](const RequestError& error) {
          deliver(request, [onError, error] {
            if (onError) onError(error);
          });
        });
        if (!ran) deliver(request, {});  // skipped as stale: dropped below, and counted
      },
      Qt::QueuedConnection);
}

void DatabaseSession::deliver(const RequestTracker::Request& request, std::function<void()> reply) {
  // Queued to this object: the session outlives the worker thread (its destructor waits for it),
  // and the requester's existence is looked at here, on its own thread.
  QMetaObject::invokeMethod(
      this,
      [this, request, reply = std::move(reply)] {
        const bool delivered = reply && request.finish();
        if (delivered) reply();
        emit requestEnded(delivered);
      },
      Qt::QueuedConnection);
}

}  // namespace idem::admin

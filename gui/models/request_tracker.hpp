// Who asked, and which of its requests still counts: the console's version of Hotspot's
// JobTracker. Each requester (a table, the detail pane, the settle dialog's assessment) owns a
// RequestTracker; every request it starts supersedes the ones before it, and cancel() supersedes
// them all (a new filter, another record). DatabaseSession decides with it, in one place, whether a
// reply is delivered: only while the requester exists and the request is its latest. Consumers
// never see, let alone filter, a reply meant for someone else or for an older question.
#pragma once

#include <QObject>
#include <QPointer>
#include <QtGlobal>
#include <atomic>
#include <memory>

namespace idem::admin {

class RequestTracker {
  struct State {
    std::atomic<quint64> latest{0};  // read by the worker thread
    bool running = false;            // the requester's thread only
  };

 public:
  enum class Policy {
    // A request superseded while it waits for the worker is not run at all.
    SkipWhenSuperseded,
    // Run whatever happens meanwhile (settle: a decision is always carried out or refused, never
    // silently skipped); only the reply is dropped when nobody waits for it any more.
    AlwaysRun,
  };

  // One request as the worker and the delivery see it. Copyable across threads: the request
  // numbers are atomic; the requester and `running` are only looked at on the requester's thread.
  // It keeps what it needs alive, so a tracker may go before its replies come.
  class Request {
   public:
    // Worker thread: skip it, because a newer request (or a cancel) came since?
    bool isSkippable() const;
    // Requester's thread: true (and the tracker no longer running) when the reply is to be
    // delivered; false when it is to be dropped: its requester is gone, or it was superseded.
    bool finish() const;

   private:
    friend class RequestTracker;
    quint64 number_ = 0;
    Policy policy_ = Policy::SkipWhenSuperseded;
    std::shared_ptr<State> state_;
    QPointer<QObject> requester_;
  };

  // The requester: replies are delivered on its thread, and only while it exists.
  explicit RequestTracker(QObject* requester, Policy policy = Policy::SkipWhenSuperseded);

  QObject* requester() const { return requester_; }
  // A request was started and neither answered nor superseded yet.
  bool isRunning() const { return state_->running; }

  // Everything requested so far is stale from now on.
  void cancel();
  // For DatabaseSession: a new request, superseding the earlier ones.
  Request start();

 private:
  QPointer<QObject> requester_;
  Policy policy_;
  std::shared_ptr<State> state_;
};

}  // namespace idem::admin

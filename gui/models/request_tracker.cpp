#include "models/request_tracker.hpp"

namespace idem::admin {

bool RequestTracker::Request::isSkippable() const {
  return policy_ == Policy::SkipWhenSuperseded &&
         state_->latest.load(std::memory_order_acquire) != number_;
}

bool RequestTracker::Request::finish() const {
  if (requester_.isNull() || state_->latest.load(std::memory_order_acquire) != number_) {
    return false;
  }
  state_->running = false;
  return true;
}

RequestTracker::RequestTracker(QObject* requester, Policy policy)
    : requester_(requester), policy_(policy), state_(std::make_shared<State>()) {}

void RequestTracker::cancel() {
  state_->latest.fetch_add(1, std::memory_order_acq_rel);
  state_->running = false;
}

RequestTracker::Request RequestTracker::start() {
  Request request;
  request.number_ = state_->latest.fetch_add(1, std::memory_order_acq_rel) + 1;
  request.policy_ = policy_;
  request.state_ = state_;
  request.requester_ = requester_;
  state_->running = true;
  return request;
}

}  // namespace idem::admin

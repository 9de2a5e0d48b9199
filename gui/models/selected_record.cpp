#include "models/selected_record.hpp"

#include "models/database_session.hpp"

namespace idem::admin {

SelectedRecord::SelectedRecord(DatabaseSession* session, QObject* parent)
    : QObject(parent), session_(session) {
  connect(session_, &DatabaseSession::evidenceFetched, this, &SelectedRecord::onEvidence);
  connect(session_, &DatabaseSession::jobFailed, this,
          [this](quint64 job, const QString& message, bool) {
            if (job != pendingJob_ || job == 0) return;
            pendingJob_ = 0;
            lastError_ = message;
            emit failed(message);
          });
  connect(session_, &DatabaseSession::jobDropped, this, [this](quint64 job) {
    if (job == pendingJob_) pendingJob_ = 0;
  });
}

void SelectedRecord::select(const std::string& key) {
  if (key == key_) return;
  generation_.advance();
  pendingJob_ = 0;
  key_ = key;
  record_.reset();
  missing_ = false;
  lastError_.clear();
  transitions_.setTransitions({});
  attempts_.setAttempts({});
  fundFlows_.setFlows({});
  emit changed();
  if (!key_.empty()) request();
}

void SelectedRecord::refresh() {
  if (key_.empty() || pendingJob_ != 0) return;
  request();
}

void SelectedRecord::request() {
  pendingJob_ = session_->fetchEvidence(generation_.ticket(session_->nextJob()), key_);
}

void SelectedRecord::onEvidence(quint64 job, const RecordEvidence& evidence) {
  if (job != pendingJob_ || job == 0 || evidence.key != key_) return;
  pendingJob_ = 0;
  lastError_.clear();
  record_ = evidence.record;
  missing_ = !evidence.record.has_value();
  transitions_.setTransitions(evidence.transitions);
  attempts_.setAttempts(evidence.attempts);
  fundFlows_.setFlows(evidence.fundFlows);
  emit changed();
}

}  // namespace idem::admin

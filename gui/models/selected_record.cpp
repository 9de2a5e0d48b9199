#include "models/selected_record.hpp"

#include "models/database_session.hpp"
#include "models/database_worker.hpp"

namespace idem::admin {

SelectedRecord::SelectedRecord(DatabaseSession* session, QObject* parent)
    : QObject(parent), session_(session), evidence_(this) {}

void SelectedRecord::select(const std::string& key) {
  if (key == key_) return;
  evidence_.cancel();
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
  if (key_.empty() || evidence_.isRunning()) return;
  request();
}

void SelectedRecord::request() {
  session_->submit(
      evidence_, "read the record",
      [key = key_](pqxx::connection& c) { return readEvidence(c, key); },
      [this](const RecordEvidence& evidence) { onEvidence(evidence); },
      [this](const RequestError& error) {
        lastError_ = QString::fromStdString(error.what());
        emit failed(lastError_);
      });
}

void SelectedRecord::onEvidence(const RecordEvidence& evidence) {
  lastError_.clear();
  record_ = evidence.record;
  missing_ = !evidence.record.has_value();
  transitions_.setTransitions(evidence.transitions);
  attempts_.setAttempts(evidence.attempts);
  fundFlows_.setFlows(evidence.fundFlows);
  emit changed();
}

}  // namespace idem::admin

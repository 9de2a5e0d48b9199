// The record the operator is looking at, with its evidence: the history, the attempts and the fund
// flows of its business object, each as a table model. Selecting another record clears everything
// at once, so the detail pane never shows one record's evidence under another's key, and a late
// answer for the previous selection is dropped.
#pragma once

#include <QObject>
#include <QString>
#include <optional>
#include <string>

#include "idem/domain.hpp"
#include "models/attempt_model.hpp"
#include "models/fund_flow_model.hpp"
#include "models/request_tracker.hpp"
#include "models/transition_model.hpp"
#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseSession;

class SelectedRecord : public QObject {
  Q_OBJECT

 public:
  explicit SelectedRecord(DatabaseSession* session, QObject* parent = nullptr);

  // "" clears the selection.
  void select(const std::string& key);
  // Re-reads the evidence of the same record (after a refresh tick or a settle).
  void refresh();

  const std::string& key() const { return key_; }
  // The record as last read; empty while loading, when nothing is selected or the key is gone.
  const std::optional<Record>& record() const { return record_; }
  bool isLoading() const { return evidence_.isRunning(); }
  bool isMissing() const { return missing_; }  // read, and there is no such record
  const QString& lastError() const { return lastError_; }

  TransitionModel* transitions() { return &transitions_; }
  AttemptModel* attempts() { return &attempts_; }
  FundFlowModel* fundFlows() { return &fundFlows_; }

 signals:
  // The selection or its evidence changed: the detail pane redraws from record() and the models.
  void changed();
  void failed(const QString& message);

 private:
  void request();
  void onEvidence(const RecordEvidence& evidence);

  DatabaseSession* session_;
  RequestTracker evidence_;
  std::string key_;
  std::optional<Record> record_;
  bool missing_ = false;
  QString lastError_;
  TransitionModel transitions_;
  AttemptModel attempts_;
  FundFlowModel fundFlows_;
};

}  // namespace idem::admin

// The operator's decision on a stuck record, or the correction of a FAILED one. It shows the record
// as the operator saw it and the fund flows of its business object, weighs the chosen outcome
// against them (idem::assessSettle: whether the ledger records the record's side effect, per its
// business type, is the database's answer), requires a reason, and sends the decision through
// idem::settleRecord, the same checked path as `idemctl settle`, with the version the operator saw.
//
// UNKNOWN, or PROCESSING past its lease: SUCCESS or FAILED. FAILED while the ledger records the
// side effect is refused by the server unless the operator ticks the explicit override; for a type
// whose side effect leaves no ledger line (a coupon) the dialog says plainly that the ledger cannot
// tell and FAILED is the operator's word. A FAILED record is offered SUCCESS only, as a correction
// (it happened after all). Every refusal (side_effect_recorded, lease_active, a record that changed
// meanwhile) is shown as the server's answer words it, and nothing is written; on a conflict the
// dialog lists what changed and who changed it.
#pragma once

#include <QDeadlineTimer>
#include <QDialog>
#include <optional>
#include <vector>

#include "idem/domain.hpp"
#include "idem/settlement.hpp"
#include "models/fund_flow_model.hpp"
#include "models/request_tracker.hpp"
#include "models/settle_evidence.hpp"
#include "models/transition_model.hpp"

class QCheckBox;
class QDialogButtonBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QRadioButton;
class QTreeView;
class QVBoxLayout;

namespace idem::admin {

class DatabaseSession;

class SettleDialog : public QDialog {
  Q_OBJECT

 public:
  enum class Phase {
    Editing,   // the operator is deciding; nothing sent
    Sending,   // waiting for the database
    Settled,   // written
    Conflict,  // the record changed since; nothing written
    Refused,   // the record is gone or already settled; nothing written
  };

  SettleDialog(DatabaseSession* session, const Record& seen, std::vector<FundFlow> flows,
               QWidget* parent = nullptr);

  Phase phase() const { return phase_; }
  const Record& seen() const { return seen_; }
  const std::optional<idem::SettleOutcome>& outcome() const { return outcome_; }
  QString message() const;
  QString warnings() const;
  bool overrideOffered() const;
  // A FAILED record: only the correction to SUCCESS is offered.
  bool isCorrection() const { return correction_; }
  bool offers(RecordStatus to) const;
  QString moneyPositionText() const;
  TransitionModel* conflictModel() { return &changesSince_; }

  // The same as clicking the radio button / the Settle button.
  void chooseTarget(RecordStatus to);
  // Fills the gateway reference and the evidence JSON, which the operator may still change (the
  // charge a reconciliation row found).
  void prefillEvidence(const EvidenceInput& evidence);
  void submit();

 signals:
  void recordSettled(const QString& key, const idem::SettleOutcome& outcome);
  // The decision was refused because the record moved on: the main window re-reads it.
  void recordChanged(const QString& key);
  // The database's weighing of the chosen outcome arrived and is shown.
  void assessed();

 private:
  // The constructor's parts, top to bottom.
  void addSummary(QVBoxLayout* layout);
  void addFlows(QVBoxLayout* layout);
  void addDecision(QVBoxLayout* layout);
  void addWarnings(QVBoxLayout* layout);
  void addConflict(QVBoxLayout* layout);
  void addMessageAndButtons(QVBoxLayout* layout);
  void wireSignals();

  std::optional<RecordStatus> target() const;
  void requestAssessment(bool keepOverride = false);
  void onAssessed(const idem::SettleAssessment& assessment);
  void onSettled(const idem::SettleOutcome& outcome);
  // A settle whose connection broke in flight: asks the record, every second until the database
  // answers or a minute has passed, whether it was written.
  void checkWhetherWritten(const idem::SettleRequest& request, QDeadlineTimer deadline);
  void onWrittenChecked(const idem::SettleRequest& request, const std::vector<Transition>& since);
  void showWarnings(const std::vector<std::string>& warnings, bool blocking);
  void showMoneyPosition(const idem::SettleAssessment& assessment);
  void updateOverride();
  void growToFit();
  void showMessage(const QString& text, bool error);
  void setPhase(Phase phase);

  DatabaseSession* session_;
  Record seen_;
  bool correction_;
  FundFlowModel flows_;
  TransitionModel changesSince_;
  RequestTracker assessmentRequests_{this};
  RequestTracker settleRequests_{this, RequestTracker::Policy::AlwaysRun};
  std::optional<idem::SettleAssessment> assessment_;
  std::optional<idem::SettleOutcome> outcome_;
  Phase phase_ = Phase::Editing;

  QRadioButton* toSuccess_;
  QRadioButton* toFailed_;
  QPlainTextEdit* reason_;
  QLineEdit* gatewayRef_;
  QPlainTextEdit* evidenceJson_;
  QLabel* warnings_;
  QCheckBox* override_;
  QLabel* moneyPosition_ = nullptr;
  QLabel* message_;
  QGroupBox* conflictBox_;
  QTreeView* conflictView_;
  QDialogButtonBox* buttons_;
  QPushButton* settleButton_;
};

}  // namespace idem::admin

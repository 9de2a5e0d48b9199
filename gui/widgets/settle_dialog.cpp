#include "widgets/settle_dialog.hpp"

#include <QButtonGroup>
#include <QCheckBox>
#include <QDeadlineTimer>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QScreen>
#include <QTimer>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>

#include "idem/bounded_transaction.hpp"
#include "idem/record_queries.hpp"
#include "models/age_text.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/settle_evidence.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/evidence_table.hpp"

namespace idem::admin {
namespace {

// A settle whose connection broke in flight: how often, and how long, the record is asked
// whether it was written (the session reconnects meanwhile; a failover takes seconds).
constexpr std::chrono::milliseconds kWrittenCheckEvery{1000};
constexpr std::chrono::seconds kWrittenCheckFor{60};

// The legend before the evidence is weighed; then the business type's own rule replaces it.
const QString kCountedFlows = QStringLiteral(
    "What proves the side effect depends on the business type (idem.business_types).");

}  // namespace

SettleDialog::SettleDialog(DatabaseSession* session, const Record& seen,
                           std::vector<FundFlow> flows, QWidget* parent)
    : QDialog(parent),
      session_(session),
      seen_(seen),
      correction_(!isUnsettled(seen.status)),
      toSuccess_(new QRadioButton(this)),
      toFailed_(new QRadioButton(this)),
      reason_(new QPlainTextEdit(this)),
      gatewayRef_(new QLineEdit(this)),
      evidenceJson_(new QPlainTextEdit(this)),
      warnings_(new QLabel(this)),
      override_(new QCheckBox(this)),
      message_(new QLabel(this)),
      conflictBox_(new QGroupBox(this)),
      buttons_(new QDialogButtonBox(QDialogButtonBox::Cancel, this)) {
  setObjectName(QStringLiteral("settleDialog"));
  setWindowTitle((correction_ ? QStringLiteral("Correct %1") : QStringLiteral("Settle %1"))
                     .arg(fromUtf8(seen_.idempotencyKey)));
  setMinimumWidth(920);
  flows_.setFlows(std::move(flows));
  flows_.setMarkingMoneyMovement(true);

  auto* layout = new QVBoxLayout(this);
  addSummary(layout);
  addFlows(layout);
  addDecision(layout);
  addWarnings(layout);
  addConflict(layout);
  addMessageAndButtons(layout);
  wireSignals();

  showMessage(correction_ ? QStringLiteral("Say what shows the money moved after all. Nothing is "
                                           "written until you press Correct to SUCCESS.")
                          : QStringLiteral("Choose the outcome the evidence shows, and say why. "
                                           "Nothing is written until you press Settle."),
              false);
  if (correction_) chooseTarget(RecordStatus::Success);
}

// What the operator is deciding on, as they saw it: the record, its last error, and what a
// correction or an expired lease means.
void SettleDialog::addSummary(QVBoxLayout* layout) {
  auto* summary = new QLabel(this);
  summary->setObjectName(QStringLiteral("settleSummary"));
  summary->setTextFormat(Qt::RichText);
  summary->setWordWrap(true);
  summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QString details;
  if (seen_.lastError) {
    details +=
        QStringLiteral("<br>last error: <i>%1</i>").arg(fromUtf8(*seen_.lastError).toHtmlEscaped());
  }
  if (correction_) {
    details += seen_.retryAllowed
                   ? QStringLiteral(
                         "<br>the failure may be retried: the same request would "
                         "claim it again")
                   : QStringLiteral("<br>a final failure: a retry is replayed the error");
    details += QStringLiteral(
        "<br><b>A correction:</b> FAILED can only become SUCCESS, when the money moved after "
        "all (a late capture, a gateway statement line).");
  } else if (seen_.status == RecordStatus::Processing && seen_.leaseExpiresAt) {
    details += QStringLiteral("<br>lease expired at %1: the claimant has not answered")
                   .arg(displayTime(*seen_.leaseExpiresAt));
  }
  summary->setText(
      QStringLiteral("<b>%1</b> &nbsp;%2&nbsp; version %3, for %4<br>%5 / %6 \u00B7 tool %7%8")
          .arg(fromUtf8(seen_.idempotencyKey).toHtmlEscaped(), statusBadgeHtml(seen_.status))
          .arg(seen_.version)
          .arg(ageText(localNow() - seen_.updatedAt))
          .arg(fromUtf8(seen_.bizType).toHtmlEscaped(), fromUtf8(seen_.bizId).toHtmlEscaped(),
               fromUtf8(seen_.tool).toHtmlEscaped(), details));
  layout->addWidget(summary);
}

// The business object's fund flows, the evidence the decision rests on, and the money position the
// database's assessment states.
void SettleDialog::addFlows(QVBoxLayout* layout) {
  auto* flowsBox =
      new QGroupBox(QStringLiteral("Fund flows of %1 / %2 (%3)")
                        .arg(fromUtf8(seen_.bizType), fromUtf8(seen_.bizId))
                        .arg(flows_.rowCount() == 0 ? QStringLiteral("none recorded")
                                                    : QString::number(flows_.rowCount())),
                    this);
  auto* flowsLayout = new QVBoxLayout(flowsBox);
  auto* flowsView =
      makeEvidenceTable(&flows_, flowsBox, QStringLiteral("settleFlows"), RowSelection::None);
  flowsView->setMaximumHeight(130);
  fitColumns(flowsView,
             {QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("UNFREEZE"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("gw-0123456789ab"),
              QStringLiteral("issue_coupon:cpn-49183:73f301"), QStringLiteral("Duplicate of")});
  flowsLayout->addWidget(flowsView);
  moneyPosition_ = new QLabel(flowsBox);
  moneyPosition_->setObjectName(QStringLiteral("settleMoneyPosition"));
  moneyPosition_->setWordWrap(true);
  moneyPosition_->setTextFormat(Qt::RichText);
  moneyPosition_->setText(kCountedFlows);
  flowsLayout->addWidget(moneyPosition_);
  layout->addWidget(flowsBox);
}

// The outcome, the required reason and the optional gateway reference and evidence JSON.
void SettleDialog::addDecision(QVBoxLayout* layout) {
  auto* decision = new QGroupBox(QStringLiteral("Decision"), this);
  auto* form = new QFormLayout(decision);
  toSuccess_->setText(
      correction_ ? QStringLiteral("SUCCESS \u2014 a correction: the money moved after all")
                  : QStringLiteral("SUCCESS \u2014 the side effect happened (the money moved)"));
  toSuccess_->setObjectName(QStringLiteral("settleToSuccess"));
  toFailed_->setText(
      QStringLiteral("FAILED \u2014 it did not happen; the same request may claim it again"));
  toFailed_->setObjectName(QStringLiteral("settleToFailed"));
  // Only the targets the database allows an operator from this status are offered (a FAILED
  // record is only corrected to SUCCESS).
  const OperatorMoves& moves = session_->info().operatorMoves;
  for (auto [button, to] :
       {std::pair{toSuccess_, RecordStatus::Success}, std::pair{toFailed_, RecordStatus::Failed}}) {
    button->setVisible(moves.allows(seen_.status, to));
    button->setEnabled(moves.allows(seen_.status, to));
  }
  auto* group = new QButtonGroup(this);
  group->addButton(toSuccess_);
  group->addButton(toFailed_);
  auto* targets = new QVBoxLayout;
  targets->addWidget(toSuccess_);
  targets->addWidget(toFailed_);
  form->addRow(correction_ ? QStringLiteral("Correct to:") : QStringLiteral("Settle to:"), targets);

  reason_->setObjectName(QStringLiteral("settleReason"));
  reason_->setPlaceholderText(
      QStringLiteral("Required: what the decision rests on (\"gateway console shows txn 8841 "
                     "captured at 10:02\")"));
  reason_->setTabChangesFocus(true);
  reason_->setFixedHeight(reason_->fontMetrics().height() * 4);
  form->addRow(QStringLiteral("Reason:"), reason_);
  gatewayRef_->setObjectName(QStringLiteral("settleGatewayRef"));
  gatewayRef_->setPlaceholderText(QStringLiteral("optional: the gateway's transaction id"));
  form->addRow(QStringLiteral("Gateway ref:"), gatewayRef_);
  evidenceJson_->setObjectName(QStringLiteral("settleEvidenceJson"));
  evidenceJson_->setPlaceholderText(QStringLiteral(
      "optional JSON object, e.g. {\"statement_line\": 1841, \"ticket\": \"OPS-311\"}"));
  evidenceJson_->setTabChangesFocus(true);
  evidenceJson_->setFixedHeight(evidenceJson_->fontMetrics().height() * 3);
  form->addRow(QStringLiteral("Evidence:"), evidenceJson_);
  layout->addWidget(decision);
}

// The assessment's warnings and the money-moved override, both hidden until an assessment asks.
void SettleDialog::addWarnings(QVBoxLayout* layout) {
  warnings_->setObjectName(QStringLiteral("settleWarnings"));
  warnings_->setWordWrap(true);
  warnings_->setTextFormat(Qt::RichText);
  warnings_->setVisible(false);
  layout->addWidget(warnings_);
  override_->setObjectName(QStringLiteral("settleOverride"));
  override_->setText(QStringLiteral(
      "Override: money moved. The downstream confirms it did not happen or was undone: settle "
      "FAILED anyway"));
  override_->setToolTip(QStringLiteral(
      "idem.settle(..., override_money_moved => true): the transition's evidence records the "
      "override, who made it and the side effect overridden"));
  override_->setVisible(false);
  layout->addWidget(override_);
}

// What changed since the operator looked, shown when the settle is refused as a conflict.
void SettleDialog::addConflict(QVBoxLayout* layout) {
  conflictBox_->setObjectName(QStringLiteral("settleConflict"));
  conflictBox_->setTitle(QStringLiteral("Changed since you looked \u2014 nothing was written"));
  auto* conflictLayout = new QVBoxLayout(conflictBox_);
  conflictView_ = makeEvidenceTable(&changesSince_, conflictBox_,
                                    QStringLiteral("settleConflictTable"), RowSelection::None);
  conflictView_->setMaximumHeight(120);
  fitColumns(conflictView_,
             {QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("PROCESSING"),
              QStringLiteral("PROCESSING"), QStringLiteral("99"), QStringLiteral("checkout_agent"),
              QStringLiteral("operator"), QStringLiteral("gateway console shows the capture")});
  conflictLayout->addWidget(conflictView_);
  conflictBox_->setVisible(false);
  layout->addWidget(conflictBox_);
}

void SettleDialog::addMessageAndButtons(QVBoxLayout* layout) {
  message_->setObjectName(QStringLiteral("settleMessage"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(message_);

  settleButton_ = buttons_->addButton(
      correction_ ? QStringLiteral("Correct to SUCCESS") : QStringLiteral("Settle"),
      QDialogButtonBox::AcceptRole);
  settleButton_->setObjectName(QStringLiteral("settleButton"));
  settleButton_->setDefault(false);
  settleButton_->setAutoDefault(false);
  layout->addWidget(buttons_);
}

void SettleDialog::wireSignals() {
  // The Settle button submits; only a successful settle closes the dialog.
  connect(settleButton_, &QPushButton::clicked, this, &SettleDialog::submit);
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(toSuccess_, &QRadioButton::toggled, this, [this](bool on) {
    if (on) requestAssessment();
  });
  connect(toFailed_, &QRadioButton::toggled, this, [this](bool on) {
    if (on) requestAssessment();
    updateOverride();
  });
  // Ticked or unticked by the operator: the warnings say what the decision now means.
  connect(override_, &QCheckBox::clicked, this, [this] { requestAssessment(true); });
}

std::optional<RecordStatus> SettleDialog::target() const {
  if (toSuccess_->isChecked()) return RecordStatus::Success;
  if (toFailed_->isChecked()) return RecordStatus::Failed;
  return std::nullopt;
}

QString SettleDialog::message() const {
  return message_->text();
}
QString SettleDialog::warnings() const {
  return warnings_->isHidden() ? QString() : warnings_->text();
}
bool SettleDialog::overrideOffered() const {
  return !override_->isHidden();
}

void SettleDialog::chooseTarget(RecordStatus to) {
  if (to == RecordStatus::Success) toSuccess_->setChecked(true);
  if (to == RecordStatus::Failed && toFailed_->isEnabled()) toFailed_->setChecked(true);
}

void SettleDialog::prefillEvidence(const EvidenceInput& evidence) {
  gatewayRef_->setText(evidence.gatewayReference);
  evidenceJson_->setPlainText(evidence.json);
}

bool SettleDialog::offers(RecordStatus to) const {
  return to == RecordStatus::Success
             ? toSuccess_->isEnabled() && !toSuccess_->isHidden()
             : to == RecordStatus::Failed && toFailed_->isEnabled() && !toFailed_->isHidden();
}

QString SettleDialog::moneyPositionText() const {
  return moneyPosition_->text();
}

void SettleDialog::updateOverride() {
  // Offered where the server's side_effect_recorded rule applies: FAILED while the ledger records
  // the side effect, as the assessment or a refusal said.
  const bool recorded =
      (assessment_ && assessment_->sideEffectRecorded) ||
      (outcome_ && outcome_->verdict == idem::SettleVerdict(ResultCode::SideEffectRecorded));
  const bool offered = target() == RecordStatus::Failed && recorded;
  override_->setVisible(offered);
  if (!offered) override_->setChecked(false);
  growToFit();
}

void SettleDialog::requestAssessment(bool keepOverride) {
  const auto to = target();
  if (!to || phase_ != Phase::Editing) return;
  if (!keepOverride) {  // a new target: weighed afresh, the override unticked
    assessment_.reset();
    outcome_.reset();
    override_->setChecked(false);
    updateOverride();
  }
  session_->submit(
      assessmentRequests_, "weigh the evidence",
      [key = seen_.idempotencyKey, to = *to,
       overridden = !override_->isHidden() && override_->isChecked()](pqxx::connection& c) {
        return assess(c, key, to, overridden);
      },
      [this](const idem::SettleAssessment& assessment) { onAssessed(assessment); },
      [this](const RequestError& error) {
        showWarnings({"could not weigh the evidence: " + std::string(error.what())}, false);
      });
}

void SettleDialog::onAssessed(const idem::SettleAssessment& assessment) {
  assessment_ = assessment;
  std::vector<std::string> lines = assessment.warnings;
  if (assessment.record && assessment.record->version != seen_.version) {
    lines.insert(lines.begin(), "the record changed since you opened it: now " +
                                    std::string(format(assessment.record->status)) +
                                    " at version " + std::to_string(assessment.record->version) +
                                    "; settling will be refused, close and look again");
  }
  if (!assessment.record) lines.insert(lines.begin(), "the record no longer exists");
  if (assessment.flows.size() != static_cast<std::size_t>(flows_.rowCount())) {
    flows_.setFlows(assessment.flows);  // a flow arrived since the detail was read
  }
  showMoneyPosition(assessment);
  showWarnings(lines, assessment.blocking);
  updateOverride();
  emit assessed();
}

void SettleDialog::showMoneyPosition(const idem::SettleAssessment& assessment) {
  if (!assessment.record) return;
  const QString object = QStringLiteral("%1 / %2").arg(fromUtf8(assessment.record->bizType),
                                                       fromUtf8(assessment.record->bizId));
  const QString type = fromUtf8(assessment.record->bizType).toHtmlEscaped();
  if (!assessment.ledgerCanTell) {
    // Nothing the machine holds can tell: say so plainly, this is the operator's own word.
    moneyPosition_->setText(
        QStringLiteral("<b style=\"color:%1;\">The ledger cannot tell</b> whether this %2 "
                       "happened (%3). FAILED is your word that it did not: check the downstream "
                       "system first.")
            .arg(toneCss(Tone::Warning), type,
                 fromUtf8(assessment.typeDescription).toHtmlEscaped()));
    return;
  }
  const QString verdict =
      assessment.sideEffectRecorded
          ? QStringLiteral("<b style=\"color:%1;\">Money moved</b>").arg(toneCss(Tone::MoneyMoved))
          : QStringLiteral("<b>No money moved</b>");
  QString counted = QStringLiteral("Counted for a %1: %2")
                        .arg(type, fromUtf8(idem::describeKinds(assessment.effectKinds)));
  if (!assessment.reversalKinds.empty()) {
    counted += QStringLiteral(" against %1, within one currency")
                   .arg(fromUtf8(idem::describeKinds(assessment.reversalKinds)));
  }
  if (!assessment.typeDeclared) counted += QStringLiteral(" (the type is not declared)");
  moneyPosition_->setText(QStringLiteral("%1 for %2, as the database counts it. %3.")
                              .arg(verdict, object.toHtmlEscaped(), counted));
}

void SettleDialog::showWarnings(const std::vector<std::string>& warnings, bool blocking) {
  if (warnings.empty()) {
    warnings_->setVisible(false);
    return;
  }
  QString html;
  for (const std::string& w : warnings) {
    html += QStringLiteral("<li>%1</li>").arg(fromUtf8(w).toHtmlEscaped());
  }
  const QString colour = toneCss(blocking ? Tone::AlarmBackground : Tone::WarningBackground);
  warnings_->setStyleSheet(
      QStringLiteral(
          "QLabel { background: %1; border: 1px solid %2; padding: 6px; border-radius: 3px; }")
          .arg(colour, toneCss(blocking ? Tone::Alarm : Tone::Warning)));
  warnings_->setText(QStringLiteral("<b>%1</b><ul style=\"margin: 2px 0 0 -20px;\">%2</ul>")
                         .arg(blocking
                                  ? QStringLiteral("Stop: the database refuses this as it stands")
                                  : QStringLiteral("Check before you settle"),
                              html));
  warnings_->setVisible(true);
  growToFit();
}

void SettleDialog::submit() {
  if (phase_ != Phase::Editing) return;
  const auto to = target();
  if (!to) {
    showMessage(correction_ ? QStringLiteral("Choose SUCCESS.")
                            : QStringLiteral("Choose SUCCESS or FAILED."),
                true);
    return;
  }
  const EvidenceResult evidence =
      buildEvidence({gatewayRef_->text(), evidenceJson_->toPlainText()});
  if (!evidence.error.isEmpty()) {
    showMessage(evidence.error, true);
    evidenceJson_->setFocus();
    return;
  }
  idem::SettleRequest request;
  request.key = seen_.idempotencyKey;
  request.expectedVersion = seen_.version;  // the version the operator saw, never the latest
  request.to = *to;
  request.reason = reason_->toPlainText().trimmed().toStdString();
  request.evidence = evidence.json;
  request.overrideSideEffect = !override_->isHidden() && override_->isChecked();

  // The same checks settleRecord makes, here so nothing is sent for a blank reason.
  if (const auto problems = idem::validateSettleRequest(request); !problems.empty()) {
    QString joined;
    for (const std::string& p : problems)
      joined += (joined.isEmpty() ? QString() : QStringLiteral("; ")) + fromUtf8(p);
    showMessage(QStringLiteral("Not settled: %1.").arg(joined), true);
    reason_->setFocus();
    return;
  }
  // Nothing else is checked here: whether the side effect is recorded, whether the lease runs,
  // the version is current are the server's to decide, and its refusal is shown as it says it.
  setPhase(Phase::Sending);
  showMessage(QStringLiteral("Settling\u2026"), false);
  session_->submit(
      settleRequests_, "settle", [request](pqxx::connection& c) { return settle(c, request); },
      [this](const idem::SettleOutcome& outcome) { onSettled(outcome); },
      [this, request](const RequestError& error) {
        if (error.endsSession()) {
          checkWhetherWritten(request, QDeadlineTimer(kWrittenCheckFor));
          return;
        }
        // Safe to try again: the version check refuses a second write if the first one landed.
        setPhase(Phase::Editing);
        showMessage(QStringLiteral("Not settled: %1").arg(QString::fromStdString(error.what())),
                    true);
      });
}

void SettleDialog::onSettled(const idem::SettleOutcome& outcome) {
  outcome_ = outcome;
  const QString key = fromUtf8(seen_.idempotencyKey);
  // Every refusal is shown as the settle path words it from the server's answer.
  const QString said = fromUtf8(outcome.message);
  if (outcome.verdict == idem::kSettleInputRefused) {
    setPhase(Phase::Editing);
    showMessage(said, true);
    return;
  }
  switch (*outcome.verdict) {
    case ResultCode::Ok:
      setPhase(Phase::Settled);
      showMessage(said, false);
      emit recordSettled(key, outcome);
      accept();
      return;
    case ResultCode::SideEffectRecorded:
      // Nothing written; the operator may check the gateway and tick the override.
      setPhase(Phase::Editing);
      if (outcome.assessment.record) {
        assessment_ = outcome.assessment;
        if (outcome.assessment.flows.size() != static_cast<std::size_t>(flows_.rowCount())) {
          flows_.setFlows(outcome.assessment.flows);
        }
        showMoneyPosition(outcome.assessment);
      }
      if (!outcome.assessment.warnings.empty()) showWarnings(outcome.assessment.warnings, true);
      updateOverride();
      showMessage(said, true);
      override_->setFocus();
      return;
    case ResultCode::LeaseActive:
      // Nothing written; the same decision may be sent again once the lease has ended.
      setPhase(Phase::Editing);
      if (!outcome.assessment.warnings.empty()) showWarnings(outcome.assessment.warnings, true);
      showMessage(said, true);
      return;
    case ResultCode::Conflict:
      changesSince_.setTransitions(outcome.changesSince);
      conflictBox_->setVisible(true);
      setPhase(Phase::Conflict);
      showMessage(said, true);
      emit recordChanged(key);
      return;
    case ResultCode::NotFound:
    case ResultCode::InvalidTransition:
    case ResultCode::NotClaimant:  // never a settle's answer (settle takes no token)
      setPhase(Phase::Refused);
      showMessage(said, true);
      emit recordChanged(key);
      return;
  }
}

// The connection broke while the settle was in flight (a failover, a network cut): it may have
// committed or not, and only the record can tell. Once the database answers again (the session
// reconnects by itself), the changes since the version seen say which: this settle's transition
// first, none at all, or someone else's.
void SettleDialog::checkWhetherWritten(const idem::SettleRequest& request,
                                       QDeadlineTimer deadline) {
  setPhase(Phase::Sending);
  showMessage(QStringLiteral("The connection to the database broke while settling: checking "
                             "whether the settle was written\u2026"),
              false);
  session_->submit(
      settleRequests_, "check whether the settle was written",
      [key = request.key, seenVersion = seen_.version](pqxx::connection& c) {
        idem::ReadTransaction tx(c);
        return idem::transitionsOf(tx, key, seenVersion);
      },
      [this, request](const std::vector<Transition>& since) { onWrittenChecked(request, since); },
      [this, request, deadline](const RequestError&) {
        if (deadline.hasExpired()) {
          setPhase(Phase::Editing);
          showMessage(QStringLiteral("Not known whether the settle was written: the database has "
                                     "not answered since the connection broke. The record's "
                                     "timeline will say; settling again is safe (a second "
                                     "settle is refused if the first was written)."),
                      true);
          return;
        }
        QTimer::singleShot(kWrittenCheckEvery, this,
                           [this, request, deadline] { checkWhetherWritten(request, deadline); });
      });
}

void SettleDialog::onWrittenChecked(const idem::SettleRequest& request,
                                    const std::vector<Transition>& since) {
  const QString key = fromUtf8(request.key);
  const bool written = !since.empty() && since.front().actorKind == ActorKind::Operator &&
                       since.front().toStatus == request.to &&
                       since.front().reason == request.reason;
  if (written) {
    idem::SettleOutcome outcome;
    outcome.verdict = ResultCode::Ok;
    outcome.change = {ResultCode::Ok, request.to, since.front().version};
    outcome.message = "settled " + request.key + " to " + std::string(format(request.to)) +
                      " (version " + std::to_string(since.front().version) +
                      "): the answer was lost when the connection broke, and the record shows "
                      "the settle written";
    onSettled(outcome);
    return;
  }
  if (since.empty()) {
    setPhase(Phase::Editing);
    showMessage(QStringLiteral("Not written: the connection to the database broke before the "
                               "settle committed, and the record has not changed. Settle again."),
                true);
    return;
  }
  changesSince_.setTransitions(since);
  conflictBox_->setVisible(true);
  setPhase(Phase::Conflict);
  showMessage(QStringLiteral("Not written: the connection to the database broke, and meanwhile "
                             "the record changed (below). Reopen it to decide again."),
              true);
  emit recordChanged(key);
}

void SettleDialog::growToFit() {
  // Warnings, the override and the server's answer appear while the dialog is open: it grows
  // with them (as far as its screen allows) rather than squeezing the form.
  QLayout* l = layout();
  l->activate();
  const int needed =
      l->hasHeightForWidth() ? l->totalHeightForWidth(width()) : l->totalSizeHint().height();
  int room = needed;
  if (const QScreen* s = screen()) room = std::min(needed, s->availableGeometry().height() - 40);
  if (height() < room) resize(width(), room);
}

void SettleDialog::showMessage(const QString& value, bool error) {
  message_->setText(value);
  message_->setStyleSheet(
      error ? QStringLiteral("color: %1; font-weight: 600;").arg(toneCss(Tone::ErrorText))
            : QString());
  growToFit();
}

void SettleDialog::setPhase(Phase phase) {
  phase_ = phase;
  const bool editing = phase == Phase::Editing;
  for (QWidget* w : std::initializer_list<QWidget*>{toSuccess_, reason_, gatewayRef_, evidenceJson_,
                                                    override_}) {
    w->setEnabled(editing);
  }
  toFailed_->setEnabled(editing && !correction_);
  settleButton_->setEnabled(editing);
  if (phase == Phase::Conflict || phase == Phase::Refused) {
    buttons_->button(QDialogButtonBox::Cancel)->setText(QStringLiteral("Close"));
  }
}

}  // namespace idem::admin

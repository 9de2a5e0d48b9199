#include "widgets/match_proposals_panel.hpp"

#include <QAction>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/money_text.hpp"
#include "models/utf8_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/settle_dialog.hpp"
#include "widgets/table_copy.hpp"

namespace idem::admin {
namespace {

QToolButton* buttonFor(QAction* action, QWidget* parent) {
  auto* button = new QToolButton(parent);
  button->setDefaultAction(action);
  button->setToolButtonStyle(Qt::ToolButtonTextOnly);
  return button;
}

}  // namespace

MatchProposalsPanel::MatchProposalsPanel(DatabaseSession* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      heading_(new QLabel(this)),
      table_(makeConsoleTable(&model_, this, QStringLiteral("proposalsTable"),
                              {MatchProposalModel::Key, MatchProposalModel::BizId})),
      acceptAction_(new QAction(QStringLiteral("Accept: settle SUCCESS\u2026"), this)),
      rejectAction_(new QAction(QStringLiteral("Reject"), this)) {
  setObjectName(QStringLiteral("matchProposals"));
  heading_->setObjectName(QStringLiteral("proposalsHeading"));
  heading_->setWordWrap(true);
  heading_->setTextFormat(Qt::RichText);
  acceptAction_->setObjectName(QStringLiteral("acceptProposalAction"));
  rejectAction_->setObjectName(QStringLiteral("rejectProposalAction"));
  rejectAction_->setToolTip(
      QStringLiteral("Hide this proposal until the console closes; nothing is written"));
  fitColumns(table_,
             {QStringLiteral("pay:ord-00000000:a1"), QStringLiteral("payment"),
              QStringLiteral("ord-00000000"), QStringLiteral("PROCESSING"),
              QStringLiteral("99 999.99 CNY"), QStringLiteral("2026-11-30 02:44:06"),
              QStringLiteral("1 h 59 min before the booking")},
             MatchProposalModel::Status);

  auto* bar = new QHBoxLayout;
  bar->addWidget(heading_, 1);
  bar->addWidget(buttonFor(acceptAction_, this));
  bar->addWidget(buttonFor(rejectAction_, this));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(bar);
  layout->addWidget(table_, 1);

  connect(acceptAction_, &QAction::triggered, this, &MatchProposalsPanel::acceptSelected);
  connect(rejectAction_, &QAction::triggered, this, &MatchProposalsPanel::rejectSelected);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &MatchProposalsPanel::updateActions);
  connect(&model_, &QAbstractItemModel::rowsRemoved, this, &MatchProposalsPanel::updateActions);
  connect(session_, &DatabaseSession::stateChanged, this, &MatchProposalsPanel::updateActions);
  showLine(nullptr);
}

SettleDialog* MatchProposalsPanel::settleDialog() const {
  return dialog_.data();
}

QString MatchProposalsPanel::heading() const {
  return heading_->text();
}

void MatchProposalsPanel::showLine(const StatementLine* line) {
  const bool same = line && line_ && line_->id == line->id;
  line_ = line ? std::optional<StatementLine>(*line) : std::nullopt;
  if (!same) {
    proposals_.cancel();
    model_.setProposals({});
  }
  refresh();
}

void MatchProposalsPanel::refresh() {
  if (!line_ || line_->result != StatementLineResult::Unmatched || !line_->kind ||
      !line_->bookedAt) {
    proposals_.cancel();
    model_.setProposals({});
    onProposals({});
    return;
  }
  if (!session_->isConnected()) return;
  session_->submit(
      proposals_, "read the proposed matches",
      [id = line_->id](pqxx::connection& c) { return readProposals(c, id); },
      [this](const std::vector<MatchProposal>& rows) { onProposals(rows); },
      [this](const RequestError& e) { heading_->setText(QString::fromStdString(e.what())); });
}

void MatchProposalsPanel::onProposals(const std::vector<MatchProposal>& rows) {
  model_.setProposals(rows);
  if (!line_) {
    heading_->setText(
        QStringLiteral("<b>Proposed matches</b>: select an unmatched line to see the records "
                       "it could be."));
  } else if (line_->result != StatementLineResult::Unmatched) {
    heading_->setText(
        QStringLiteral("<b>Proposed matches</b> are for unmatched lines. This line is %1: %2")
            .arg(fromUtf8(format(line_->result)),
                 line_->recordKey.empty()
                     ? QStringLiteral("no record named.")
                     : QStringLiteral("its record is %1; settle it from Records after checking "
                                      "the gateway.")
                           .arg(fromUtf8(line_->recordKey).toHtmlEscaped())));
  } else if (!line_->kind || !line_->bookedAt) {
    heading_->setText(QStringLiteral(
        "<b>Proposed matches</b>: none, the line has no kind or no booking time to compare."));
  } else {
    heading_->setText(
        QStringLiteral("<b>%1 proposed match%2</b> for %3 booked by %4: stuck records asking the "
                       "same amount, created within %5 h of the booking. <i>Proposals only: "
                       "nothing is decided until you accept one and give the reason.</i>")
            .arg(model_.rowCount())
            .arg(model_.rowCount() == 1 ? QString() : QStringLiteral("es"))
            .arg(moneyText(line_->amountMinor, line_->currency),
                 fromUtf8(line_->gateway).toHtmlEscaped())
            .arg(kProposalWindow.count()));
  }
  updateActions();
}

void MatchProposalsPanel::updateActions() {
  const MatchProposal* p = model_.proposalAt(table_->currentIndex().row());
  QString why;
  if (p == nullptr) {
    why = QStringLiteral("Select a proposed record");
  } else if (!session_->isConnected()) {
    why = QStringLiteral("Not connected to the database");
  } else if (!session_->info().isOperator) {
    why =
        QStringLiteral("Read-only: %1 is not a member of idem_operator").arg(session_->info().role);
  }
  acceptAction_->setEnabled(why.isEmpty() && !evidence_.isRunning() && !dialog_);
  acceptAction_->setToolTip(
      why.isEmpty() ? QStringLiteral("Settle %1 SUCCESS with this line as evidence (you confirm "
                                     "and give the reason)")
                          .arg(fromUtf8(p->key))
                    : why);
  rejectAction_->setEnabled(p != nullptr);
}

void MatchProposalsPanel::acceptSelected() {
  updateActions();
  const MatchProposal* p = model_.proposalAt(table_->currentIndex().row());
  if (!acceptAction_->isEnabled() || p == nullptr || !line_) return;
  acceptAction_->setEnabled(false);
  session_->submit(
      evidence_, "read the record",
      [key = p->key](pqxx::connection& c) { return readEvidence(c, key); },
      [this](const RecordEvidence& evidence) {
        openDialog(evidence);
        updateActions();
      },
      [this](const RequestError& e) {
        heading_->setText(QString::fromStdString(e.what()));
        updateActions();
      });
}

void MatchProposalsPanel::rejectSelected() {
  model_.reject(table_->currentIndex().row());
  updateActions();
}

void MatchProposalsPanel::openDialog(const RecordEvidence& evidence) {
  if (!evidence.record || !line_) {
    heading_->setText(
        QStringLiteral("%1 is gone (retention removed it): refresh").arg(fromUtf8(evidence.key)));
    return;
  }
  auto* dialog = new SettleDialog(session_, *evidence.record, evidence.fundFlows, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->prefillEvidence(proposalEvidence(*line_));
  dialog->chooseTarget(RecordStatus::Success);
  connect(dialog, &SettleDialog::recordSettled, this,
          [this](const QString& key, const idem::SettleOutcome& outcome) {
            emit recordSettled(key, QString::fromStdString(outcome.message));
            refresh();
          });
  connect(dialog, &SettleDialog::recordChanged, this, &MatchProposalsPanel::refresh);
  connect(dialog, &QObject::destroyed, this, &MatchProposalsPanel::updateActions);
  dialog_ = dialog;
  enableCellCopyIn(dialog);
  dialog->open();
  emit settleDialogOpened(dialog);
}

}  // namespace idem::admin

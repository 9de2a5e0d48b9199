#include "widgets/reconciliation_view.hpp"

#include <QAction>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSpinBox>
#include <QToolButton>
#include <QTreeView>

#include "models/csv_writer.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/settle_availability.hpp"
#include "models/settle_evidence.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/main_window.hpp"
#include "widgets/settle_dialog.hpp"
#include "widgets/table_copy.hpp"
#include "widgets/view_parts.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {
namespace {

constexpr std::chrono::milliseconds kLeaseClockMargin{500};

// The flow the decision rests on: the first charge the question found, else the first charge.
std::optional<FundFlow> chargeOf(const std::vector<FundFlow>& flows,
                                 std::optional<std::int64_t> firstChargeId) {
  for (const FundFlow& f : flows) {
    if (firstChargeId && f.id == *firstChargeId) return f;
  }
  for (const FundFlow& f : flows) {
    if (f.role == SideEffectRole::Effect) return f;
  }
  return std::nullopt;
}

// The record as the row saw it, enough to say what settling it would mean.
Record recordOf(const ReconciliationRow& row) {
  Record r;
  r.idempotencyKey = row.recordKey.value_or(std::string());
  r.bizType = row.bizType;
  r.bizId = row.bizId;
  r.status = row.recordStatus.value_or(RecordStatus::Success);
  r.version = row.recordVersion.value_or(0);
  r.leaseExpiresAt = row.recordLeaseExpiresAt;
  return r;
}

}  // namespace

ReconciliationView::ReconciliationView(DatabaseSession* session, QWidget* parent)
    : BusinessObjectTab(session, QStringLiteral("reconciliationView"), parent),
      windowHours_(new QSpinBox(this)),
      graceMinutes_(new QSpinBox(this)),
      summary_(new QLabel(this)),
      settleHint_(new QLabel(this)),
      settleButton_(new QToolButton(this)),
      settleAction_(new QAction(this)) {
  setUpSpanControls();
  setSpan(ReconciliationWindow{});

  summary_->setObjectName(QStringLiteral("reconciliationSummary"));
  summary_->setTextFormat(Qt::RichText);
  settleHint_->setObjectName(QStringLiteral("reconciliationSettleHint"));
  settleHint_->setWordWrap(true);
  settleAction_->setObjectName(QStringLiteral("reconciliationSettleAction"));
  connect(settleAction_, &QAction::triggered, this, &ReconciliationView::settleSelected);
  settleButton_->setDefaultAction(settleAction_);
  settleButton_->setToolButtonStyle(Qt::ToolButtonTextOnly);

  bar()->addWidget(new QLabel(QStringLiteral("Window:"), this));
  bar()->addWidget(windowHours_);
  bar()->addWidget(new QLabel(QStringLiteral("grace:"), this));
  bar()->addWidget(graceMinutes_);
  bar()->addSpacing(12);
  bar()->addWidget(summary_, 1);
  bar()->addWidget(settleHint_, 1);
  bar()->addWidget(settleButton_);

  QTreeView* table = makeConsoleTable(&model_, this, QStringLiteral("reconciliationTable"),
                                      {ReconciliationModel::Key, ReconciliationModel::BizId});
  fitColumns(table, {QStringLiteral("money moved, no SUCCESS"), QStringLiteral("payment"),
                     QStringLiteral("ord-00000000"), QStringLiteral("PROCESSING"),
                     QStringLiteral("issue_coupon:cpn-49183:73f301"), QStringLiteral("99"),
                     QStringLiteral("99 999.99 CNY"), QStringLiteral("99"),
                     QStringLiteral("gw-0123456789ab"), QStringLiteral("2026-11-30 02:44:06")});

  setRowsTable(table);

  connect(windowHours_, &QSpinBox::valueChanged, this, &ReconciliationView::refresh);
  connect(graceMinutes_, &QSpinBox::valueChanged, this, &ReconciliationView::refresh);
  connect(table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &ReconciliationView::onCurrentChanged);
  connect(session_, &DatabaseSession::stateChanged, this, &ReconciliationView::updateSettleAction);
  connect(table, &QAbstractItemView::doubleClicked, this, [this] {
    if (settleAction_->isEnabled()) settleSelected();
  });
  updateSettleAction();
}

// The window and grace period: the exporter's flags, here per view.
void ReconciliationView::setUpSpanControls() {
  windowHours_->setObjectName(QStringLiteral("reconciliationWindow"));
  windowHours_->setRange(1, 24 * 30);
  windowHours_->setSuffix(QStringLiteral(" h"));
  windowHours_->setToolTip(
      QStringLiteral("How far back the questions look (the exporter's "
                     "--reconcile-window)"));
  graceMinutes_->setObjectName(QStringLiteral("reconciliationGrace"));
  graceMinutes_->setRange(0, 24 * 60);
  graceMinutes_->setSuffix(QStringLiteral(" min"));
  graceMinutes_->setToolTip(
      QStringLiteral("The newest changes are left out for this long: a charge whose SUCCESS is on "
                     "its way is not a mismatch yet (the exporter's grace period)"));
}

SettleDialog* ReconciliationView::settleDialog() const {
  return dialog_.data();
}

ReconciliationWindow ReconciliationView::span() const {
  return {std::chrono::hours(windowHours_->value()), std::chrono::minutes(graceMinutes_->value())};
}

void ReconciliationView::setSpan(const ReconciliationWindow& window) {
  const QSignalBlocker a(windowHours_);
  const QSignalBlocker b(graceMinutes_);
  windowHours_->setValue(static_cast<int>(window.window.count() / 3600));
  graceMinutes_->setValue(static_cast<int>(window.grace.count() / 60));
  refresh();
}

void ReconciliationView::refresh() {
  read(
      "read the money questions",
      [w = span()](pqxx::connection& c) { return readReconciliation(c, w); },
      [this](const std::vector<ReconciliationRow>& rows) { onRows(rows); });
}

void ReconciliationView::onRows(const std::vector<ReconciliationRow>& rows) {
  model_.setRows(rows);
  summary_->setText(
      QStringLiteral("<b>%1</b> money moved without SUCCESS \u00B7 <b>%2</b> SUCCESS without "
                     "money moved")
          .arg(model_.count(MoneyQuestion::MovedWithoutSuccess))
          .arg(model_.count(MoneyQuestion::SuccessWithoutMoney)));
  updateSettleAction();
  emit countChanged(model_.rowCount());
}

bool ReconciliationView::selectRow(const std::string& identity) {
  for (int row = 0; row < model_.rowCount(); ++row) {
    if (model_.rowAt(row)->identity() == identity) {
      table()->setCurrentIndex(model_.index(row, 0));
      return true;
    }
  }
  return false;
}

const ReconciliationRow* ReconciliationView::currentRow() const {
  return model_.rowAt(table()->currentIndex().row());
}

void ReconciliationView::onCurrentChanged() {
  const ReconciliationRow* row = currentRow();
  showObject(row ? row->bizType : std::string(), row ? row->bizId : std::string());
  updateSettleAction();
}

void ReconciliationView::updateSettleAction() {
  const ReconciliationRow* row = currentRow();
  QString why;
  QString text = QStringLiteral("Settle SUCCESS\u2026");
  if (row == nullptr) {
    why = QStringLiteral("Select a \"money moved, no SUCCESS\" row to settle its record");
  } else if (row->question == MoneyQuestion::SuccessWithoutMoney) {
    why = QStringLiteral(
        "A SUCCESS record: nothing to settle. Its records and flows are below; check the "
        "gateway for the charge");
  } else if (!row->recordKey) {
    why = QStringLiteral(
        "No record for this business object: the money moved without a request through the "
        "layer, nothing to settle");
  } else if (!session_->isConnected()) {
    why = QStringLiteral("Not connected to the database");
  } else if (!session_->info().isOperator) {
    why =
        QStringLiteral("Read-only: %1 is not a member of idem_operator").arg(session_->info().role);
  } else {
    const SettleAvailability a = settleAvailability(
        recordOf(*row), localNow() + session_->info().clockOffset - kLeaseClockMargin,
        session_->info().operatorMoves);
    if (a.correction) text = QStringLiteral("Correct to SUCCESS\u2026");
    if (!a.allowed) why = a.explanation;
  }
  settleAction_->setText(text);
  settleAction_->setEnabled(why.isEmpty() && !evidence_.isRunning());
  settleAction_->setToolTip(why.isEmpty() ? QStringLiteral("Settle %1 SUCCESS, the charge as "
                                                           "evidence (you confirm and give the "
                                                           "reason)")
                                                .arg(fromUtf8(*row->recordKey))
                                          : why);
  settleHint_->setText(row && row->question == MoneyQuestion::MovedWithoutSuccess ? why
                                                                                  : QString());
}

void ReconciliationView::settleSelected() {
  updateSettleAction();
  const ReconciliationRow* row = currentRow();
  if (!settleAction_->isEnabled() || row == nullptr) return;
  if (dialog_) {
    dialog_->raise();
    return;
  }
  settleAction_->setEnabled(false);
  session_->submit(
      evidence_, "read the record",
      [key = *row->recordKey](pqxx::connection& c) { return readEvidence(c, key); },
      [this, seen = *row](const RecordEvidence& evidence) {
        openDialog(evidence, seen);
        updateSettleAction();
      },
      [this](const RequestError& e) {
        settleHint_->setText(QString::fromStdString(e.what()));
        updateSettleAction();
      });
}

void ReconciliationView::openDialog(const RecordEvidence& evidence, const ReconciliationRow& row) {
  if (!evidence.record) {
    settleHint_->setText(
        QStringLiteral("%1 is gone (retention removed it): refresh").arg(fromUtf8(evidence.key)));
    return;
  }
  auto* dialog = new SettleDialog(session_, *evidence.record, evidence.fundFlows, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  if (const std::optional<FundFlow> charge = chargeOf(evidence.fundFlows, row.firstChargeId)) {
    dialog->prefillEvidence(evidenceOfCharge(*charge));
  }
  dialog->chooseTarget(RecordStatus::Success);
  connect(dialog, &SettleDialog::recordSettled, this,
          [this](const QString& key, const idem::SettleOutcome& outcome) {
            emit recordSettled(key, QString::fromStdString(outcome.message));
            refresh();
          });
  connect(dialog, &SettleDialog::recordChanged, this, &ReconciliationView::refresh);
  dialog_ = dialog;
  enableCellCopyIn(dialog);
  dialog->open();
  emit settleDialogOpened(dialog);
}

namespace {

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Reconciliation"),
    .order = 30,
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new ReconciliationView(c.session, parent);
          countInTitle(c, view);
          QObject::connect(view, &ReconciliationView::recordSettled, &c.window,
                           &MainWindow::announceSettled);
          return tableView(view, QStringLiteral("reconciliation"));
        },
});

}  // namespace

}  // namespace idem::admin

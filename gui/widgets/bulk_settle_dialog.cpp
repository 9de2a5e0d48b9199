#include "widgets/bulk_settle_dialog.hpp"

#include <QButtonGroup>
#include <QDateTime>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSaveFile>
#include <QTableView>
#include <QVBoxLayout>

#include "models/csv_writer.hpp"
#include "models/database_session.hpp"
#include "models/status_palette.hpp"

namespace idem::admin {
namespace {

QString number(qint64 n) {
  return QLocale(QLocale::English).toString(n);
}

}  // namespace

BulkSettleDialog::BulkSettleDialog(DatabaseSession* session, QWidget* parent)
    : QDialog(parent),
      session_(session),
      run_(session, this),
      count_(new QLabel(this)),
      toSuccess_(new QRadioButton(QStringLiteral("SUCCESS: the side effect happened"), this)),
      toFailed_(new QRadioButton(
          QStringLiteral("FAILED: it did not; the same request may claim the record again"), this)),
      reason_(new QPlainTextEdit(this)),
      message_(new QLabel(this)),
      progress_(new QProgressBar(this)),
      table_(new QTableView(this)),
      summary_(new QLabel(this)),
      startButton_(new QPushButton(QStringLiteral("Settle each"), this)),
      cancelButton_(new QPushButton(QStringLiteral("Cancel the run"), this)),
      exportButton_(new QPushButton(QStringLiteral("Export CSV\u2026"), this)),
      closeButton_(new QPushButton(QStringLiteral("Close"), this)) {
  setObjectName(QStringLiteral("bulkSettleDialog"));
  setWindowTitle(QStringLiteral("Settle many records"));
  setUpFields();
  layOut();
  wireSignals();
  resize(980, 680);
  showCount();
  updateButtons();
}

void BulkSettleDialog::setUpFields() {
  count_->setObjectName(QStringLiteral("bulkCount"));
  count_->setTextFormat(Qt::RichText);
  count_->setWordWrap(true);
  toSuccess_->setObjectName(QStringLiteral("bulkToSuccess"));
  toFailed_->setObjectName(QStringLiteral("bulkToFailed"));
  auto* decision = new QButtonGroup(this);
  decision->addButton(toSuccess_);
  decision->addButton(toFailed_);
  reason_->setObjectName(QStringLiteral("bulkReason"));
  reason_->setPlaceholderText(
      QStringLiteral("Required: the evidence the decision rests on (written on every record)"));
  reason_->setMaximumHeight(70);
  message_->setObjectName(QStringLiteral("bulkMessage"));
  message_->setWordWrap(true);
  progress_->setObjectName(QStringLiteral("bulkProgress"));
  progress_->setFormat(QStringLiteral("%v of %m records"));
  progress_->setValue(0);
  table_->setObjectName(QStringLiteral("bulkResults"));
  table_->setModel(run_.results());
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideRight);  // the messages' beginnings say what happened
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setColumnWidth(BulkResultModel::Key, 240);
  summary_->setObjectName(QStringLiteral("bulkSummary"));
  startButton_->setObjectName(QStringLiteral("bulkStart"));
  cancelButton_->setObjectName(QStringLiteral("bulkCancel"));
  exportButton_->setObjectName(QStringLiteral("bulkExport"));
}

void BulkSettleDialog::layOut() {
  auto* intro = new QLabel(
      QStringLiteral("Each record is settled on its own, through the same checks as a single "
                     "settle, with the version listed here: a record that changed since, whose "
                     "lease is live or whose money moved is refused and listed, not "
                     "overwritten."),
      this);
  intro->setWordWrap(true);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(startButton_);
  buttons->addWidget(cancelButton_);
  buttons->addStretch(1);
  buttons->addWidget(exportButton_);
  buttons->addWidget(closeButton_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(count_);
  layout->addWidget(intro);
  layout->addWidget(toSuccess_);
  layout->addWidget(toFailed_);
  layout->addWidget(new QLabel(QStringLiteral("Reason:"), this));
  layout->addWidget(reason_);
  layout->addWidget(message_);
  layout->addWidget(progress_);
  layout->addWidget(table_, 1);
  layout->addWidget(summary_);
  layout->addLayout(buttons);
}

void BulkSettleDialog::wireSignals() {
  connect(startButton_, &QPushButton::clicked, this, &BulkSettleDialog::start);
  connect(cancelButton_, &QPushButton::clicked, this, &BulkSettleDialog::cancelRun);
  connect(exportButton_, &QPushButton::clicked, this, &BulkSettleDialog::exportToFile);
  connect(closeButton_, &QPushButton::clicked, this, &BulkSettleDialog::reject);
  connect(&run_, &BulkSettle::progressed, this, &BulkSettleDialog::onProgress);
  connect(&run_, &BulkSettle::finished, this, &BulkSettleDialog::onFinished);
}

void BulkSettleDialog::setTargets(std::vector<BulkTarget> targets, const QString& what) {
  targets_ = std::move(targets);
  matching_ = static_cast<qint64>(targets_.size());
  what_ = what;
  showCount();
  updateButtons();
}

void BulkSettleDialog::listMatching(const RecordFilter& filter) {
  targets_.clear();
  matching_ = 0;
  what_ = QStringLiteral("records matching the current filter");
  count_->setText(QStringLiteral("Counting the records that match the current filter\u2026"));
  updateButtons();
  session_->submit(
      listing_, "list the matching records",
      [filter](pqxx::connection& c) { return idem::admin::listMatching(c, filter); },
      [this](const BulkListing& listing) {
        targets_ = listing.targets;
        matching_ = listing.matching;
        showCount();
        updateButtons();
        emit listed();
      },
      [this](const RequestError& e) {
        showMessage(QString::fromUtf8(e.what()), true);
        emit listed();
      });
}

QString BulkSettleDialog::countText() const {
  return count_->text();
}

QString BulkSettleDialog::message() const {
  return message_->text();
}

void BulkSettleDialog::showCount() {
  const QString many = matching_ > kBulkCountLimit
                           ? QStringLiteral("more than %1").arg(number(kBulkCountLimit))
                           : number(matching_);
  QString text = QStringLiteral("<b>%1</b> %2").arg(many, what_);
  if (matching_ > kBulkSettleCap) {
    text += QStringLiteral(
                " \u2014 <span style=\"color:%1;\">more than the cap of %2: narrow the filter "
                "or the selection</span>")
                .arg(toneCss(Tone::ErrorText), number(kBulkSettleCap));
  }
  count_->setText(text);
  progress_->setMaximum(std::max(1, targetCount()));
}

void BulkSettleDialog::chooseTarget(RecordStatus to) {
  (to == RecordStatus::Success ? toSuccess_ : toFailed_)->setChecked(true);
}

void BulkSettleDialog::setReason(const QString& reason) {
  reason_->setPlainText(reason);
}

bool BulkSettleDialog::start() {
  if (!toSuccess_->isChecked() && !toFailed_->isChecked()) {
    showMessage(QStringLiteral("choose the decision: SUCCESS or FAILED"), true);
    return false;
  }
  const BulkDecision decision{
      toSuccess_->isChecked() ? RecordStatus::Success : RecordStatus::Failed,
      reason_->toPlainText().toStdString()};
  // The cap is on what matched, not on what was listed: 1,001 matching records are refused even
  // though only the first 1,000 were read.
  if (matching_ > static_cast<qint64>(targets_.size())) {
    showMessage(bulkSettleRefusal(static_cast<std::size_t>(matching_), decision), true);
    return false;
  }
  if (!run_.start(targets_, decision)) {
    showMessage(run_.refusal(), true);
    return false;
  }
  progress_->setMaximum(std::max(1, run_.total()));
  progress_->setValue(0);
  showMessage(QStringLiteral("settling %1 records, one at a time\u2026").arg(number(run_.total())),
              false);
  updateButtons();
  return true;
}

void BulkSettleDialog::cancelRun() {
  run_.cancel();
  showMessage(QStringLiteral("cancelling: the record being settled finishes, no other is sent"),
              false);
}

void BulkSettleDialog::onProgress(int processed, int) {
  progress_->setValue(processed);
  summary_->setText(run_.results()->summary());
}

void BulkSettleDialog::onFinished() {
  progress_->setValue(run_.total());
  summary_->setText(run_.results()->summary());
  showMessage(run_.wasCancelled() ? QStringLiteral("cancelled: the records not reached are "
                                                   "listed as not run, nothing was written to them")
                                  : QStringLiteral("done"),
              false);
  updateButtons();
  emit finished();
}

void BulkSettleDialog::reject() {
  // Closing stops the run between records; what was settled stays settled.
  run_.cancel();
  QDialog::reject();
}

int BulkSettleDialog::exportCsv(QIODevice& out) const {
  return writeCsv(*run_.results(), out, BulkResultModel::ExportRole);
}

void BulkSettleDialog::exportToFile() {
  const QString path = QFileDialog::getSaveFileName(
      this, QStringLiteral("Export the results as CSV"),
      QStringLiteral("idemwatch-bulk-settle-%1.csv")
          .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmm"))),
      QStringLiteral("CSV files (*.csv)"));
  if (path.isEmpty()) return;
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || exportCsv(file) < 0 || !file.commit()) {
    showMessage(QStringLiteral("Cannot write %1: %2").arg(path, file.errorString()), true);
    return;
  }
  showMessage(
      QStringLiteral("Exported %1 rows to %2").arg(number(run_.results()->rowCount()), path),
      false);
}

void BulkSettleDialog::showMessage(const QString& text, bool error) {
  message_->setText(text);
  message_->setStyleSheet(
      error ? QStringLiteral("color: %1; font-weight: 600;").arg(toneCss(Tone::ErrorText))
            : QString());
}

void BulkSettleDialog::updateButtons() {
  const bool running = run_.isRunning();
  startButton_->setEnabled(!running && run_.results()->rowCount() == 0 && !targets_.empty());
  cancelButton_->setEnabled(running);
  exportButton_->setEnabled(!running && run_.results()->rowCount() > 0);
  for (QWidget* w : std::initializer_list<QWidget*>{toSuccess_, toFailed_, reason_}) {
    w->setEnabled(!running && run_.results()->rowCount() == 0);
  }
}

}  // namespace idem::admin

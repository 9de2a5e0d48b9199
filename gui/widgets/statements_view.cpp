#include "widgets/statements_view.hpp"

#include <QCheckBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

#include "models/database_session.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/main_window.hpp"
#include "widgets/match_proposals_panel.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/view_parts.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {
namespace {

QGroupBox* boxed(QWidget* content, const QString& title, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(content);
  return box;
}

StatementsOverview readOverview(pqxx::connection& c) {
  return {readStatements(c, StatementModel::kLimit), readCoverage(c)};
}

}  // namespace

StatementsView::StatementsView(DatabaseSession* session, int pageSize, QWidget* parent)
    : QWidget(parent),
      session_(session),
      lines_(session),
      summary_(new QLabel(this)),
      coverage_(new QLabel(this)),
      stamp_(new RefreshStamp(this)),
      onlySelected_(new QCheckBox(QStringLiteral("Only the selected file's lines"), this)),
      proposals_(new MatchProposalsPanel(session, this)) {
  setObjectName(QStringLiteral("statementsView"));
  lines_.setPageSize(pageSize);
  summary_->setObjectName(QStringLiteral("statementsSummary"));
  summary_->setTextFormat(Qt::RichText);
  coverage_->setObjectName(QStringLiteral("statementsCoverage"));
  coverage_->setTextFormat(Qt::RichText);
  coverage_->setWordWrap(true);
  coverage_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  coverage_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  onlySelected_->setObjectName(QStringLiteral("statementsOnlySelected"));
  onlySelected_->setToolTip(
      QStringLiteral("Unticked: the lines to look at of every file, newest first"));
  buildFilesTable();
  buildLinesTable();
  layOut();

  connect(onlySelected_, &QCheckBox::toggled, this, &StatementsView::chooseLines);
  connect(filesTable_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &StatementsView::chooseLines);
  connect(linesTable_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &StatementsView::onCurrentLineChanged);
  connect(&lines_, &StatementLineModel::fetched, stamp_, &RefreshStamp::stamp);
  connect(&lines_, &StatementLineModel::fetchFailed, stamp_, &RefreshStamp::markFailed);
  lines_.setStatement(std::nullopt);
}

void StatementsView::buildFilesTable() {
  filesTable_ =
      makeConsoleTable(&files_, this, QStringLiteral("statementsTable"), {StatementModel::File});
  fitColumns(filesTable_, {QStringLiteral("stripe"), QStringLiteral("camt.053"),
                           QStringLiteral("balance_2026-11-30.csv"),
                           QStringLiteral("2026-11-30 00:00 \u2013 2026-12-01 00:00"),
                           QStringLiteral("not final"), QStringLiteral("99 999"),
                           QStringLiteral("99 999"), QStringLiteral("999"),
                           QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("ledger_import")});
}

void StatementsView::buildLinesTable() {
  linesTable_ = makeConsoleTable(
      &lines_, this, QStringLiteral("statementLinesTable"),
      {StatementLineModel::Key, StatementLineModel::BizId, StatementLineModel::Line});
  fitColumns(linesTable_,
             {QStringLiteral("mismatched"), QStringLiteral("stripe"),
              QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("99 999.99 CNY"),
              QStringLiteral("CAPTURE"), QStringLiteral("8816178952380553"),
              QStringLiteral("pay:ord-00000000:a1"), QStringLiteral("ord-00000000"),
              QStringLiteral("balance_2026-11-30.csv:999")},
             StatementLineModel::Result);
}

void StatementsView::layOut() {
  auto* coverageScroll = new QScrollArea(this);
  coverageScroll->setWidget(coverage_);
  coverageScroll->setWidgetResizable(true);
  coverageScroll->setFrameShape(QFrame::NoFrame);

  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(boxed(filesTable_, QStringLiteral("Statement files, newest import first"), this));
  top->addWidget(
      boxed(coverageScroll, QStringLiteral("What final statements cover, per gateway"), this));
  top->setStretchFactor(0, 3);
  top->setStretchFactor(1, 2);
  top->setSizes({1160, 440});  // the coverage's sentences need room to be read

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(top);
  split->addWidget(boxed(linesTable_, QStringLiteral("Lines a person must look at"), this));
  split->addWidget(boxed(proposals_, QStringLiteral("Proposed matches"), this));
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 2);
  split->setChildrenCollapsible(false);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(8, 6, 8, 6);
  bar->addWidget(summary_, 1);
  bar->addWidget(onlySelected_);
  bar->addSpacing(12);
  bar->addWidget(stamp_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(split, 1);
}

QString StatementsView::coverageText() const {
  return coverage_->text();
}

void StatementsView::refresh() {
  if (!session_->isConnected()) return;
  session_->submit(
      overview_, "read the statements", readOverview,
      [this](const StatementsOverview& overview) { onOverview(overview); },
      [this](const RequestError& e) { stamp_->markFailed(QString::fromStdString(e.what())); });
  lines_.refresh();
  proposals_->refresh();
}

void StatementsView::onOverview(const StatementsOverview& overview) {
  files_.setStatements(overview.files);
  coverage_->setText(idem::admin::coverageText(overview.coverage));
  std::int64_t toLookAt = 0;
  std::int64_t newLines = 0;
  for (const StatementFile& f : overview.files) {
    toLookAt += f.needsPerson;
    newLines += f.newLines;
  }
  summary_->setText(
      overview.files.empty()
          ? QStringLiteral("No statement imported yet (<tt>idemctl import-statement</tt>).")
          : QStringLiteral("<b>%1</b> statement files, %2 new lines: <b>%3</b> for a person to "
                           "look at (mismatched, unmatched, duplicate).")
                .arg(overview.files.size())
                .arg(newLines)
                .arg(toLookAt));
  stamp_->stamp();
  emit countChanged(static_cast<int>(toLookAt));
}

void StatementsView::chooseLines() {
  std::optional<std::int64_t> file;
  if (onlySelected_->isChecked()) {
    const StatementFile* f = files_.rowAt(filesTable_->currentIndex().row());
    if (f != nullptr) file = f->id;
  }
  if (file != lines_.statement()) lines_.setStatement(file);
}

void StatementsView::onCurrentLineChanged() {
  proposals_->showLine(lines_.lineAt(linesTable_->currentIndex().row()));
}

bool StatementsView::selectLine(std::int64_t lineId) {
  for (int row = 0; row < lines_.rowCount(); ++row) {
    if (lines_.lineAt(row)->id == lineId) {
      linesTable_->setCurrentIndex(lines_.index(row, 0));
      return true;
    }
  }
  return false;
}

namespace {

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Statements"),
    .order = 45,
    .menuText = QStringLiteral("S&tatements"),
    .shortcut = QKeySequence(Qt::CTRL | Qt::Key_3),
    .tip = QStringLiteral("The gateway's statements and the lines a person must look at (Ctrl+3)"),
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new StatementsView(c.session, c.pageSize, parent);
          countInTitle(c, view);
          QObject::connect(view->proposals(), &MatchProposalsPanel::recordSettled, &c.window,
                           &MainWindow::announceSettled);
          View v = tableView(view, QStringLiteral("statements"));
          // Export writes the lines to look at: what the operator works through.
          v.exportCsv = [view](QIODevice& out) {
            return writeCsv(*view->lines(), out, StatementLineModel::ExportRole);
          };
          v.exportName = QStringLiteral("statement-lines");
          return v;
        },
});

}  // namespace

}  // namespace idem::admin

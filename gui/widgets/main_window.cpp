#include "widgets/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QDateTime>
#include <QDockWidget>
#include <QFileDialog>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QSaveFile>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>

#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/record_table_model.hpp"
#include "models/selected_record.hpp"
#include "models/settle_availability.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "widgets/attention_view.hpp"
#include "widgets/bulk_settle_dialog.hpp"
#include "widgets/connection_dialog.hpp"
#include "widgets/connection_status_label.hpp"
#include "widgets/record_detail_view.hpp"
#include "widgets/record_filter_bar.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/records_view.hpp"
#include "widgets/settle_dialog.hpp"
#include "widgets/table_copy.hpp"
#include "widgets/timeline_view.hpp"

namespace idem::admin {
namespace {

constexpr std::chrono::milliseconds kLeaseClockMargin{500};

QString number(qint64 n) {
  return QLocale(QLocale::English).toString(n);
}

QLabel* statusField(QWidget* parent, const QString& name) {
  auto* label = new QLabel(parent);
  label->setObjectName(name);
  label->setTextFormat(Qt::RichText);
  label->setContentsMargins(6, 0, 6, 0);
  return label;
}

}  // namespace

MainWindow::MainWindow(const Options& options, QWidget* parent)
    : QMainWindow(parent),
      options_(options),
      session_(new DatabaseSession(this)),
      selected_(new SelectedRecord(session_, this)) {
  setObjectName(QStringLiteral("idemwatchAdmin"));
  setWindowTitle(QStringLiteral("idemwatch admin"));

  buildActions();
  buildMenus();
  buildLayout();
  buildStatusBar();
  buildTimelineAndBulkSettle();
  buildViews();

  connect(session_, &DatabaseSession::connected, this, &MainWindow::onConnected);
  connect(session_, &DatabaseSession::disconnected, this, &MainWindow::onDisconnected);
  connect(session_, &DatabaseSession::stateChanged, this, &MainWindow::updateSettleAction);
  connect(selected_, &SelectedRecord::changed, this, &MainWindow::updateSettleAction);

  leaseTimer_.setInterval(1000);
  connect(&leaseTimer_, &QTimer::timeout, this, &MainWindow::updateSettleAction);

  refreshTimer_.setInterval(static_cast<int>(options_.refreshInterval.count()));
  connect(&refreshTimer_, &QTimer::timeout, this, [this] { refreshAll(true); });
  refreshTimer_.start();

  updateSettleAction();
  updateLoadedText();
  updateRefreshText();
  resize(1500, 950);
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions() {
  const auto make = [this](const QString& text, const QList<QKeySequence>& keys, const QString& tip,
                           QStyle::StandardPixmap icon) {
    auto* a = new QAction(text, this);
    a->setShortcuts(keys);
    a->setShortcutContext(Qt::WindowShortcut);
    a->setToolTip(tip);
    a->setStatusTip(tip);
    if (icon != QStyle::SP_CustomBase) a->setIcon(style()->standardIcon(icon));
    addAction(a);
    return a;
  };
  connectAction_ = make(QStringLiteral("&Connect\u2026"), {QKeySequence(Qt::CTRL | Qt::Key_K)},
                        QStringLiteral("Choose the database (Ctrl+K)"), QStyle::SP_DriveNetIcon);
  connectAction_->setObjectName(QStringLiteral("connectAction"));
  refreshAction_ = make(QStringLiteral("&Refresh"), {QKeySequence(Qt::Key_F5)},
                        QStringLiteral("Re-read what is shown, keeping the selection (F5)"),
                        QStyle::SP_BrowserReload);
  refreshAction_->setObjectName(QStringLiteral("refreshAction"));
  pauseAction_ = make(
      QStringLiteral("&Pause auto-refresh"), {QKeySequence(Qt::Key_Space), QKeySequence(Qt::Key_P)},
      QStringLiteral("Stop refreshing every few seconds (Space or P)"), QStyle::SP_MediaPause);
  pauseAction_->setObjectName(QStringLiteral("pauseAction"));
  pauseAction_->setCheckable(true);
  exportAction_ =
      make(QStringLiteral("&Export view as CSV\u2026"), {QKeySequence(Qt::CTRL | Qt::Key_E)},
           QStringLiteral("Write the rows of the visible table to a CSV file (Ctrl+E)"),
           QStyle::SP_DialogSaveButton);
  exportAction_->setObjectName(QStringLiteral("exportAction"));
  settleAction_ = make(QStringLiteral("&Settle\u2026"), {QKeySequence(Qt::CTRL | Qt::Key_S)},
                       QStringLiteral("Decide the outcome of the selected stuck record (Ctrl+S)"),
                       QStyle::SP_DialogApplyButton);
  settleAction_->setObjectName(QStringLiteral("settleAction"));
  copyKeyAction_ = make(
      QStringLiteral("Copy &key"), {QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C)},
      QStringLiteral("Copy the selected idempotency key (Ctrl+Shift+C)"), QStyle::SP_CustomBase);
  quitAction_ = make(QStringLiteral("&Quit"), {QKeySequence::Quit}, QStringLiteral("Quit"),
                     QStyle::SP_CustomBase);

  connect(connectAction_, &QAction::triggered, this, [this] {
    if (auto settings = ConnectionDialog::ask(this)) connectTo(*settings);
  });
  connect(refreshAction_, &QAction::triggered, this, &MainWindow::refreshNow);
  connect(pauseAction_, &QAction::toggled, this, [this](bool paused) { setPaused(paused); });
  connect(exportAction_, &QAction::triggered, this, &MainWindow::exportToFile);
  connect(settleAction_, &QAction::triggered, this, [this] { openSettleDialog(); });
  connect(copyKeyAction_, &QAction::triggered, this, [this] {
    if (!selected_->key().empty())
      QApplication::clipboard()->setText(QString::fromStdString(selected_->key()));
  });
  connect(quitAction_, &QAction::triggered, this, &QWidget::close);
}

// File, View (a entry for each view that asks for one, then Refresh, Pause and the views' own
// actions), Record, and the toolbar.
void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
  file->addAction(connectAction_);
  file->addAction(exportAction_);
  file->addSeparator();
  file->addAction(quitAction_);
  viewMenu_ = menuBar()->addMenu(QStringLiteral("&View"));
  for (const ViewRegistration* r : registeredViews()) {
    if (r->menuText.isEmpty()) continue;
    auto* show = new QAction(r->menuText, this);
    show->setShortcut(r->shortcut);
    show->setShortcutContext(Qt::WindowShortcut);
    show->setToolTip(r->tip);
    show->setStatusTip(r->tip);
    addAction(show);
    viewMenu_->addAction(show);
    connect(show, &QAction::triggered, this, [this, name = r->name] {
      for (const Tab& tab : tabList_) {
        if (tab.name == name) showView(tab.view.page);
      }
    });
  }
  viewMenu_->addSeparator();
  viewMenu_->addAction(refreshAction_);
  viewMenu_->addAction(pauseAction_);
  QMenu* record = menuBar()->addMenu(QStringLiteral("&Record"));
  record->addAction(settleAction_);
  record->addAction(copyKeyAction_);

  QToolBar* bar = addToolBar(QStringLiteral("Main"));
  bar->setObjectName(QStringLiteral("mainToolBar"));
  bar->setMovable(false);
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  bar->addAction(refreshAction_);
  bar->addAction(pauseAction_);
  bar->addSeparator();
  bar->addAction(settleAction_);
  bar->addSeparator();
  bar->addAction(exportAction_);
  bar->addAction(connectAction_);
}

void MainWindow::buildLayout() {
  tabs_ = new QTabWidget(this);
  tabs_->setObjectName(QStringLiteral("viewTabs"));
  tabs_->setDocumentMode(true);

  detail_ = new RecordDetailView(selected_, settleAction_, this);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->setObjectName(QStringLiteral("mainSplitter"));
  splitter->addWidget(tabs_);
  splitter->addWidget(detail_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setSizes({600, 320});
  splitter->setChildrenCollapsible(false);
  setCentralWidget(splitter);
}

void MainWindow::buildStatusBar() {
  connectionLabel_ = new ConnectionStatusLabel(session_, this);
  readOnlyLabel_ = statusField(this, QStringLiteral("readOnlyStatus"));
  readOnlyLabel_->setStyleSheet(
      QStringLiteral("QLabel { background: %1; color: %2; font-weight: 600; border-radius: 3px; }")
          .arg(toneCss(Tone::WaitingBackground), toneCss(Tone::Waiting)));
  readOnlyLabel_->setVisible(false);
  countsLabel_ = statusField(this, QStringLiteral("countsStatus"));
  loadedLabel_ = statusField(this, QStringLiteral("loadedStatus"));
  refreshLabel_ = statusField(this, QStringLiteral("refreshStatus"));
  statusBar()->addWidget(connectionLabel_, 1);
  statusBar()->addPermanentWidget(readOnlyLabel_);
  statusBar()->addPermanentWidget(countsLabel_);
  statusBar()->addPermanentWidget(loadedLabel_);
  statusBar()->addPermanentWidget(refreshLabel_);
}

// One tab for each registered view, in order. A record table's selection, double click, context
// menu, pages and clock are wired here, the same for each.
void MainWindow::buildViews() {
  const ViewContext context{*this, session_, options_.pageSize, *viewMenu_};
  for (const ViewRegistration* r : registeredViews()) {
    View view = r->make(context, this);
    tabs_->addTab(view.page, r->name);
    if (view.records != nullptr) wireRecordTable(view.records);
    tabList_.push_back({r->name, std::move(view)});
  }
  connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::onTabChanged);
  // Every table, each view's, copies its current cell (Ctrl+C, context menu).
  enableCellCopyIn(this);
}

void MainWindow::wireRecordTable(RecordTableView* table) {
  RecordTableModel* model = table->recordModel();
  connect(model, &RecordTableModel::fetched, this, [this](const RecordPage& page) {
    emit recordPageRead(page);
    updateLoadedText();
  });
  connect(model, &RecordTableModel::fetchFailed, this, [this](const QString& message) {
    statusBar()->showMessage(message, 15000);
    updateLoadedText();
  });
  connect(model, &RecordTableModel::loadingChanged, this, &MainWindow::updateLoadedText);
  connect(model, &RecordTableModel::modelReset, this, &MainWindow::updateLoadedText);
  connect(table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this, table](const QModelIndex& current) { onCurrentRowChanged(table, current); });
  connect(table, &QAbstractItemView::doubleClicked, this, [this] {
    if (settleAction_->isEnabled()) openSettleDialog();
  });
  table->setContextMenuPolicy(Qt::ActionsContextMenu);
  table->addAction(bulkSettleAction_);
  table->addAction(bulkSettleMatchingAction_);
}

void MainWindow::connectTo(const idem::ConnectionSettings& settings) {
  session_->open(DatabaseSession::withAdminDefaults(settings), options_.backoff);
}

SettleDialog* MainWindow::settleDialog() const {
  return settleDialog_.data();
}

QString MainWindow::connectionStatusText() const {
  return connectionLabel_->text();
}
QString MainWindow::countsText() const {
  return countsLabel_->text();
}
bool MainWindow::isPaused() const {
  return pauseAction_->isChecked();
}
bool MainWindow::isReadOnly() const {
  return session_->isConnected() && !session_->info().isOperator;
}

RecordTableModel* MainWindow::recordsModel() const {
  return view<RecordsView>()->model();
}
RecordTableModel* MainWindow::attentionModel() const {
  return view<AttentionView>()->model();
}
RecordTableView* MainWindow::recordsView() const {
  return view<RecordsView>()->table();
}
RecordTableView* MainWindow::attentionView() const {
  return view<AttentionView>()->table();
}
RecordFilterBar* MainWindow::filterBar() const {
  return view<RecordsView>()->filterBar();
}

void MainWindow::showRecords() {
  showView(view<RecordsView>());
}
void MainWindow::showAttention() {
  showView(view<AttentionView>());
}
bool MainWindow::attentionShown() const {
  return tabs_->currentWidget() == view<AttentionView>();
}

void MainWindow::showView(QWidget* page) {
  tabs_->setCurrentWidget(page);
}

void MainWindow::setTabCount(QWidget* page, qint64 count) {
  const int index = tabs_->indexOf(page);
  for (const Tab& tab : tabList_) {
    if (tab.view.page == page) {
      tabs_->setTabText(
          index, count > 0 ? QStringLiteral("%1 (%2)").arg(tab.name, number(count)) : tab.name);
    }
  }
}

void MainWindow::setTitleDetail(const QString& detail) {
  titleDetail_ = detail;
  updateWindowTitle();
}

const MainWindow::Tab* MainWindow::currentTab() const {
  for (const Tab& tab : tabList_) {
    if (tab.view.page == tabs_->currentWidget()) return &tab;
  }
  return nullptr;
}

RecordTableView* MainWindow::activeView() const {
  const Tab* current = currentTab();
  if (current != nullptr && current->view.records != nullptr) return current->view.records;
  for (const Tab& tab : tabList_) {
    if (tab.view.records != nullptr) return tab.view.records;
  }
  return nullptr;
}
RecordTableModel* MainWindow::activeModel() const {
  RecordTableView* table = activeView();
  return table != nullptr ? table->recordModel() : nullptr;
}

bool MainWindow::selectRecord(const QString& key) {
  if (activeModel() == nullptr) return false;
  const int row = activeModel()->rowOfKey(key.toStdString());
  if (row < 0) return false;
  RecordTableView* view = activeView();
  view->setCurrentIndex(activeModel()->index(row, RecordTableModel::Key));
  view->selectRow(row);
  view->scrollTo(activeModel()->index(row, 0));
  return true;
}

void MainWindow::setPaused(bool paused) {
  if (pauseAction_->isChecked() != paused) {
    pauseAction_->setChecked(paused);  // re-enters through toggled
    return;
  }
  pauseAction_->setText(paused ? QStringLiteral("&Resume auto-refresh")
                               : QStringLiteral("&Pause auto-refresh"));
  pauseAction_->setIcon(
      style()->standardIcon(paused ? QStyle::SP_MediaPlay : QStyle::SP_MediaPause));
  updateRefreshText();
}

void MainWindow::refreshNow() {
  refreshAll(false);
}

void MainWindow::refreshAll(bool automatic) {
  if (automatic && (isPaused() || !session_->isConnected())) return;
  for (const Tab& tab : tabList_) {
    if (tab.view.refresh) tab.view.refresh(automatic);
  }
  requestCounts();
  selected_->refresh();
  for (const Tab& tab : tabList_) {
    if (tab.view.records != nullptr) tab.view.records->recordModel()->touchAges();
  }
  updateLoadedText();
}

void MainWindow::requestCounts() {
  if (countsRequests_.isRunning()) return;
  session_->submit(countsRequests_, "count stuck records", readCounts,
                   [this](const UnsettledCounts& counts) { showCounts(counts); });
}

void MainWindow::onConnected(const ConnectionInfo& info) {
  for (const Tab& tab : tabList_) {
    if (tab.view.records != nullptr)
      tab.view.records->recordModel()->setClockOffset(info.clockOffset);
  }
  readOnlyLabel_->setText(QStringLiteral("READ-ONLY"));
  readOnlyLabel_->setToolTip(
      QStringLiteral("%1 is not a member of idem_operator: records can be inspected, not settled")
          .arg(info.role));
  readOnlyLabel_->setVisible(!info.isOperator);
  updateWindowTitle();
  // After a first connection or a reconnect: re-read everything, keeping the rows shown meanwhile.
  refreshAll(false);
  updateSettleAction();
}

void MainWindow::onDisconnected(const QString& message, int, bool needsPassword) {
  updateSettleAction();
  if (needsPassword) emit passwordNeeded(message);
}

void MainWindow::showCounts(const UnsettledCounts& counts) {
  const qint64 stuck = counts.processingPastLease + counts.unknown;
  emit countsChanged(counts);
  countsLabel_->setText(
      stuck > 0
          ? QStringLiteral("stuck: <b style=\"color:%1;\">%2</b> processing past lease \u00B7 "
                           "<b style=\"color:%3;\">%4</b> unknown")
                .arg(toneCss(Tone::Waiting), number(counts.processingPastLease),
                     toneCss(Tone::NeedsPerson), number(counts.unknown))
          : QStringLiteral("nothing stuck"));
  countsLabel_->setToolTip(
      QStringLiteral("%1 PROCESSING (%2 past their lease), %3 UNKNOWN; about %4 records in all")
          .arg(number(counts.processing), number(counts.processingPastLease),
               number(counts.unknown),
               counts.estimatedRecords >= 0 ? number(counts.estimatedRecords)
                                            : QStringLiteral("?")));
}

void MainWindow::onCurrentRowChanged(RecordTableView* view, const QModelIndex& current) {
  if (view != activeView()) return;
  auto* model = static_cast<RecordTableModel*>(view->model());
  // Rows moving or leaving during a refresh move Qt's current index to a neighbour; the detail
  // stays on the record the operator chose.
  if (model->isApplying()) return;
  selected_->select(current.isValid()
                        ? current.data(RecordTableModel::KeyRole).toString().toStdString()
                        : std::string());
}

void MainWindow::onTabChanged() {
  // The other tabs show their own business object; the record detail is for the record tables.
  const Tab* current = currentTab();
  detail_->setVisible(current != nullptr && current->view.records != nullptr);
  exportAction_->setEnabled(current != nullptr && static_cast<bool>(current->view.exportCsv));
  if (activeView() == nullptr) return;
  const QModelIndex row = activeView()->currentIndex();
  selected_->select(row.isValid() ? row.data(RecordTableModel::KeyRole).toString().toStdString()
                                  : std::string());
  updateLoadedText();
}

void MainWindow::updateSettleAction() {
  QString why;   // not allowed: why
  QString tip;   // allowed: what it will do
  QString hint;  // beside the detail's Settle button: a live lease, a correction
  bool correction = false;
  bool leaseLive = false;
  const std::optional<Record>& r = selected_->record();
  if (!session_->isConnected()) {
    why = QStringLiteral("Not connected to the database");
  } else if (!session_->info().isOperator) {
    why = QStringLiteral(
              "Read-only: %1 is not a member of idem_operator, so it may not settle records")
              .arg(session_->info().role);
  } else if (selected_->key().empty()) {
    why = QStringLiteral("Select a PROCESSING, UNKNOWN or FAILED record to settle it");
  } else if (!r) {
    why = QStringLiteral("The selected record is still loading");
  } else {
    // Leases are on the server's clock, which is known to within half a round trip: the lease is
    // taken to run a little longer, so the action is not offered a moment before the server
    // would still answer lease_active.
    const SettleAvailability a =
        settleAvailability(*r, localNow() + session_->info().clockOffset - kLeaseClockMargin,
                           session_->info().operatorMoves);
    correction = a.correction;
    leaseLive = a.leaseEndsAt.has_value();
    (a.allowed ? tip : why) = a.explanation;
    if (leaseLive || correction) hint = a.explanation;
  }
  // While a lease runs, decide again every second: the countdown moves, and the action becomes
  // available when the lease ends, without a refresh or a new selection.
  if (leaseLive && !leaseTimer_.isActive()) leaseTimer_.start();
  if (!leaseLive) leaseTimer_.stop();

  settleAction_->setEnabled(why.isEmpty());
  settleAction_->setText(correction ? QStringLiteral("&Correct to SUCCESS\u2026")
                                    : QStringLiteral("&Settle\u2026"));
  settleAction_->setToolTip(why.isEmpty() ? tip : why);
  settleAction_->setStatusTip(why.isEmpty() ? tip : why);
  detail_->setSettleHint(hint, leaseLive);
}

void MainWindow::updateLoadedText() {
  const RecordTableModel* model = activeModel();
  if (model == nullptr) return;
  QString text = QStringLiteral("%1 %2 loaded")
                     .arg(number(model->rowCount()),
                          model->rowCount() == 1 ? QStringLiteral("row") : QStringLiteral("rows"));
  if (model->hasMore()) text += QStringLiteral(", more below");
  if (model->isLoading()) text += QStringLiteral(" \u00B7 loading\u2026");
  if (!model->lastError().isEmpty()) {
    text += QStringLiteral(" \u00B7 <span style=\"color:%1;\">last read failed</span>")
                .arg(toneCss(Tone::Alarm));
  }
  loadedLabel_->setText(text);
  loadedLabel_->setToolTip(
      model->lastError().isEmpty()
          ? QStringLiteral("last read took %1 ms in the database")
                .arg(static_cast<double>(model->lastDatabaseTime().count()) / 1000.0, 0, 'f', 1)
          : model->lastError());
}

void MainWindow::updateRefreshText() {
  const qint64 seconds = options_.refreshInterval.count() / 1000;
  refreshLabel_->setText(isPaused() ? QStringLiteral("<b>auto-refresh paused</b> (Space)")
                                    : QStringLiteral("auto-refresh every %1 s").arg(seconds));
}

SettleDialog* MainWindow::openSettleDialog() {
  updateSettleAction();
  if (!settleAction_->isEnabled()) return nullptr;
  if (settleDialog_) {
    settleDialog_->raise();
    return settleDialog_;
  }
  auto* dialog =
      new SettleDialog(session_, *selected_->record(), selected_->fundFlows()->rows(), this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &SettleDialog::recordSettled, this,
          [this](const QString& key, const idem::SettleOutcome& outcome) {
            announceSettled(key, QString::fromStdString(outcome.message));
          });
  connect(dialog, &SettleDialog::recordChanged, this, [this] { refreshAll(false); });
  settleDialog_ = dialog;
  enableCellCopyIn(dialog);
  dialog->open();
  return dialog;
}

void MainWindow::announceSettled(const QString&, const QString& message) {
  statusBar()->showMessage(message, 15000);
  refreshAll(false);
}

void MainWindow::buildTimelineAndBulkSettle() {
  timeline_ = new TimelinePane(session_, this);
  auto* dock = new QDockWidget(QStringLiteral("Timeline"), this);
  dock->setObjectName(QStringLiteral("timelineDock"));
  dock->setWidget(timeline_);
  addDockWidget(Qt::BottomDockWidgetArea, dock);
  // The selected record's business object; the same object again only re-reads its story.
  connect(selected_, &SelectedRecord::changed, this, [this] {
    const std::optional<Record>& r = selected_->record();
    if (!r) return;
    if (r->bizType == timeline_->bizType() && r->bizId == timeline_->bizId()) {
      timeline_->refresh();
    } else {
      timeline_->showBusinessObject(QString::fromStdString(r->bizType),
                                    QString::fromStdString(r->bizId));
    }
  });

  bulkSettleAction_ = new QAction(QStringLiteral("Settle se&lected\u2026"), this);
  bulkSettleAction_->setObjectName(QStringLiteral("bulkSettleAction"));
  bulkSettleAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));
  bulkSettleAction_->setStatusTip(
      QStringLiteral("Settle every selected record with one decision and one reason, each "
                     "checked on its own (Ctrl+Shift+S)"));
  bulkSettleMatchingAction_ =
      new QAction(QStringLiteral("Settle all &matching the filter\u2026"), this);
  bulkSettleMatchingAction_->setObjectName(QStringLiteral("bulkSettleMatchingAction"));
  bulkSettleMatchingAction_->setStatusTip(QStringLiteral(
      "Settle every record the records filter matches (at most 1,000), each checked on its own"));
  connect(bulkSettleAction_, &QAction::triggered, this, [this] { openBulkSettle(false); });
  connect(bulkSettleMatchingAction_, &QAction::triggered, this, [this] { openBulkSettle(true); });
  for (QMenu* menu : menuBar()->findChildren<QMenu*>()) {
    if (menu->actions().contains(settleAction_)) {
      menu->addAction(bulkSettleAction_);
      menu->addAction(bulkSettleMatchingAction_);
    }
  }
}

void MainWindow::showBusinessObject(const QString& bizType, const QString& bizId) {
  if (auto* dock = findChild<QDockWidget*>(QStringLiteral("timelineDock"))) {
    dock->show();
    dock->raise();
  }
  timeline_->showBusinessObject(bizType, bizId);
}

BulkSettleDialog* MainWindow::openBulkSettle(bool allMatching) {
  if (!session_->isConnected() || isReadOnly()) {
    statusBar()->showMessage(
        isReadOnly()
            ? QStringLiteral("Read-only: %1 may not settle records").arg(session_->info().role)
            : QStringLiteral("Not connected to the database"),
        15000);
    return nullptr;
  }
  if (activeView() == nullptr) return nullptr;
  auto* dialog = new BulkSettleDialog(session_, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  if (allMatching) {
    dialog->listMatching(activeModel()->filter());
  } else {
    std::vector<BulkTarget> targets;
    for (const Record& r : activeView()->selectedRecords()) {
      targets.push_back({r.idempotencyKey, r.version});
    }
    const auto n = static_cast<qint64>(targets.size());
    dialog->setTargets(std::move(targets), n == 1 ? QStringLiteral("selected record")
                                                  : QStringLiteral("selected records"));
  }
  connect(dialog, &BulkSettleDialog::finished, this, [this] { refreshAll(false); });
  dialog->open();
  return dialog;
}

int MainWindow::exportCsv(QIODevice& out) const {
  const Tab* current = currentTab();
  if (current == nullptr || !current->view.exportCsv) return -1;
  return current->view.exportCsv(out);
}

void MainWindow::exportToFile() {
  const Tab* current = currentTab();
  if (current == nullptr || !current->view.exportCsv) return;
  const QString suggested =
      QStringLiteral("idemwatch-%1-%2.csv")
          .arg(current->view.exportName.isEmpty() ? QStringLiteral("view")
                                                  : current->view.exportName,
               QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmm")));
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export the view as CSV"),
                                                    suggested, QStringLiteral("CSV files (*.csv)"));
  if (path.isEmpty()) return;
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    statusBar()->showMessage(QStringLiteral("Cannot write %1: %2").arg(path, file.errorString()),
                             15000);
    return;
  }
  const int rows = exportCsv(file);
  if (rows < 0 || !file.commit()) {
    statusBar()->showMessage(
        QStringLiteral("Export to %1 failed: %2").arg(path, file.errorString()), 15000);
    return;
  }
  statusBar()->showMessage(QStringLiteral("Exported %1 rows to %2").arg(number(rows), path), 15000);
}

void MainWindow::showBusinessObjectStory(const QString& bizType, const QString& bizId) {
  showBusinessObject(bizType, bizId);
  emit businessObjectChosen(bizType, bizId);
}

// "idemwatch admin — alice@idem — UNKNOWN · payment": who, where, and the views' detail (what the
// records table is limited to).
void MainWindow::updateWindowTitle() {
  QString title = QStringLiteral("idemwatch admin");
  if (session_->isConnected()) {
    const ConnectionInfo& info = session_->info();
    title += QStringLiteral(" \u2014 %1@%2%3")
                 .arg(info.role, info.database,
                      info.isOperator ? QString() : QStringLiteral(" (read-only)"));
  }
  if (!titleDetail_.isEmpty()) title += QStringLiteral(" \u2014 %1").arg(titleDetail_);
  setWindowTitle(title);
}

}  // namespace idem::admin

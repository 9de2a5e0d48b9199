// The operators' console over one DatabaseSession: the tabs, each a registered view (Records,
// Needs attention, Reconciliation, Overcharges, Trace audit; view_registry.hpp), and what they
// share: the menus and actions, the selected record's detail and the settle actions, the Timeline
// dock, refresh, export and the status bar. The window never waits for the database: it sends
// requests and redraws when answers arrive.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <QTimer>
#include <chrono>
#include <vector>

#include "idem/connection_settings.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"
#include "models/worker_replies.hpp"
#include "widgets/view_registry.hpp"

class QAction;
class QIODevice;
class QLabel;
class QMenu;
class QTabWidget;

namespace idem::admin {

class BulkSettleDialog;
class ConnectionStatusLabel;
class DatabaseSession;
class RecordDetailView;
class RecordFilterBar;
class RecordTableModel;
class RecordTableView;
class SelectedRecord;
class SettleDialog;
class TimelinePane;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  struct Options {
    std::chrono::milliseconds refreshInterval{5000};
    int pageSize = 200;
    ReconnectBackoff backoff;
  };

  explicit MainWindow(const Options& options, QWidget* parent = nullptr);
  MainWindow() : MainWindow(Options{}) {}
  ~MainWindow() override;

  void connectTo(const idem::ConnectionSettings& settings);

  // Views and actions, for main.cpp, the tests and the benchmark.
  DatabaseSession* session() const { return session_; }
  // The tab page of type T (a registered view), or nullptr: `view<ReconciliationView>()`.
  template <typename T>
  T* view() const;
  // The Records and Needs attention tabs' parts.
  RecordTableModel* recordsModel() const;
  RecordTableModel* attentionModel() const;
  RecordTableView* recordsView() const;
  RecordTableView* attentionView() const;
  RecordFilterBar* filterBar() const;
  RecordDetailView* detailView() const { return detail_; }
  SelectedRecord* selectedRecord() const { return selected_; }
  QAction* settleAction() const { return settleAction_; }
  QAction* refreshAction() const { return refreshAction_; }
  QAction* pauseAction() const { return pauseAction_; }
  QAction* exportAction() const { return exportAction_; }
  QAction* connectAction() const { return connectAction_; }
  QTabWidget* tabs() const { return tabs_; }
  SettleDialog* settleDialog() const;
  // Timeline and bulk settle.
  TimelinePane* timelinePane() const { return timeline_; }
  QAction* bulkSettleAction() const { return bulkSettleAction_; }
  QAction* bulkSettleMatchingAction() const { return bulkSettleMatchingAction_; }
  // The selected rows of the visible table, or (allMatching) every record matching the records
  // filter; nullptr when read-only or not connected (the status bar says why).
  BulkSettleDialog* openBulkSettle(bool allMatching);

  QString connectionStatusText() const;
  QString countsText() const;
  bool isPaused() const;
  bool isReadOnly() const;

  void showRecords();
  void showAttention();
  bool attentionShown() const;
  // Selects the record in the visible table, if it is loaded there.
  bool selectRecord(const QString& key);
  // The visible table as CSV (RFC 4180); the number of rows written, -1 on a write error.
  int exportCsv(QIODevice& out) const;
  // Opens the settle dialog for the selected record (nullptr when settling is not possible now:
  // the settle action's tooltip says why).
  SettleDialog* openSettleDialog();
  void refreshNow();
  void setPaused(bool paused);

  // For the views (view_registry.hpp).
  // Brings up the tab of this view's page.
  void showView(QWidget* page);
  // The view's tab title, its registered name with `count` beside it when positive:
  // "Overcharges (3)".
  void setTabCount(QWidget* page, qint64 count);
  // What the window's title adds after who and where, e.g. what the records table is limited to.
  void setTitleDetail(const QString& detail);

 public slots:
  // Draws the story of that business object in the Timeline dock and brings the dock up.
  void showBusinessObject(const QString& bizType, const QString& bizId);
  // The trace audit's selected event belongs to this business object: the Timeline dock draws
  // its story (showBusinessObject), and businessObjectChosen announces it.
  void showBusinessObjectStory(const QString& bizType, const QString& bizId);
  // A view settled a record: the server's message in the status bar, then every view re-reads.
  void announceSettled(const QString& key, const QString& message);

 signals:
  // The business object whose story the operator asked to see (showBusinessObjectStory).
  void businessObjectChosen(const QString& bizType, const QString& bizId);
  // The server wants a password and none was given: main.cpp opens the connection dialog.
  void passwordNeeded(const QString& problem);
  // The stuck records were counted (every refresh): the status bar's and the views' figures.
  void countsChanged(const idem::admin::UnsettledCounts& counts);
  // A page of any record table arrived (its biz types feed the records filter's choices).
  void recordPageRead(const idem::admin::RecordPage& page);

 private:
  struct Tab {
    QString name;  // the registered name: the tab's title without its count
    View view;
  };

  void buildActions();
  void buildMenus();
  void buildLayout();
  void buildStatusBar();
  void buildViews();
  void wireRecordTable(RecordTableView* table);
  void refreshAll(bool automatic);
  void requestCounts();
  void onConnected(const ConnectionInfo& info);
  void onDisconnected(const QString& message, int retryInMs, bool needsPassword);
  void showCounts(const UnsettledCounts& counts);
  void onCurrentRowChanged(RecordTableView* view, const QModelIndex& current);
  void onTabChanged();
  void updateSettleAction();
  void updateLoadedText();
  void updateRefreshText();
  void exportToFile();
  void updateWindowTitle();
  const Tab* currentTab() const;
  // The record table the selection, bulk settle and the loaded count follow: the shown tab's, else
  // the first tab's that has one (Records). nullptr if no view has one.
  RecordTableView* activeView() const;
  RecordTableModel* activeModel() const;

  Options options_;
  DatabaseSession* session_;
  SelectedRecord* selected_;

  std::vector<Tab> tabList_;  // in tab order
  QTabWidget* tabs_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  RecordDetailView* detail_ = nullptr;
  QString titleDetail_;

  ConnectionStatusLabel* connectionLabel_ = nullptr;
  QLabel* readOnlyLabel_ = nullptr;
  QLabel* countsLabel_ = nullptr;
  QLabel* loadedLabel_ = nullptr;
  QLabel* refreshLabel_ = nullptr;

  QAction* connectAction_ = nullptr;
  QAction* refreshAction_ = nullptr;
  QAction* pauseAction_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* settleAction_ = nullptr;
  QAction* copyKeyAction_ = nullptr;
  QAction* quitAction_ = nullptr;

  QTimer refreshTimer_;
  QTimer leaseTimer_;  // runs while the selected record's lease is live
  RequestTracker countsRequests_{this};
  QPointer<SettleDialog> settleDialog_;

  void buildTimelineAndBulkSettle();
  TimelinePane* timeline_ = nullptr;
  QAction* bulkSettleAction_ = nullptr;
  QAction* bulkSettleMatchingAction_ = nullptr;
};

template <typename T>
T* MainWindow::view() const {
  for (const Tab& tab : tabList_) {
    if (auto* page = qobject_cast<T*>(tab.view.page)) return page;
  }
  return nullptr;
}

}  // namespace idem::admin

// The operators' console: the records table with its filters, the needs-attention queue, the
// selected record's evidence and the settle action, over one DatabaseSession. The window never
// waits for the database: it sends requests and redraws when answers arrive.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <QTimer>
#include <chrono>

#include "idem/connection_settings.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"
#include "models/worker_replies.hpp"

class QAction;
class QIODevice;
class QLabel;
class QTabWidget;

namespace idem::admin {

class BulkSettleDialog;
class ConnectionStatusLabel;
class DatabaseSession;
class OverchargesView;
class ReconciliationView;
class RefreshStamp;
class TraceAuditView;
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
  RecordTableModel* recordsModel() const { return records_; }
  RecordTableModel* attentionModel() const { return attention_; }
  RecordTableView* recordsView() const { return recordsView_; }
  RecordTableView* attentionView() const { return attentionView_; }
  RecordFilterBar* filterBar() const { return filterBar_; }
  RecordDetailView* detailView() const { return detail_; }
  SelectedRecord* selectedRecord() const { return selected_; }
  QAction* settleAction() const { return settleAction_; }
  QAction* refreshAction() const { return refreshAction_; }
  QAction* pauseAction() const { return pauseAction_; }
  QAction* exportAction() const { return exportAction_; }
  QAction* connectAction() const { return connectAction_; }
  ReconciliationView* reconciliationView() const { return reconciliation_; }
  OverchargesView* overchargesView() const { return overcharges_; }
  TraceAuditView* traceAuditView() const { return traceAudit_; }
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

 public slots:
  // Draws the story of that business object in the Timeline dock and brings the dock up.
  void showBusinessObject(const QString& bizType, const QString& bizId);
  // The trace audit's selected event belongs to this business object: the Timeline dock draws
  // its story (showBusinessObject), and businessObjectChosen announces it.
  void showBusinessObjectStory(const QString& bizType, const QString& bizId);

 signals:
  // The business object whose story the operator asked to see (showBusinessObjectStory).
  void businessObjectChosen(const QString& bizType, const QString& bizId);
  // The server wants a password and none was given: main.cpp opens the connection dialog.
  void passwordNeeded(const QString& problem);

 private:
  void buildActions();
  void buildLayout();
  void refreshAll(bool automatic);
  void requestCounts();
  void onConnected(const ConnectionInfo& info);
  void onDisconnected(const QString& message, int retryInMs, bool needsPassword);
  void showCounts(const UnsettledCounts& counts);
  void onCurrentRowChanged(RecordTableView* view, const QModelIndex& current);
  void onTabChanged();
  void onRecordSettled(const QString& key, const QString& message);
  void updateSettleAction();
  void updateLoadedText();
  void updateRefreshText();
  void exportToFile();
  void buildMoneyTabs();
  void updateWindowTitle();
  RecordTableView* activeView() const;
  RecordTableModel* activeModel() const;

  Options options_;
  DatabaseSession* session_;
  RecordTableModel* records_;
  RecordTableModel* attention_;
  SelectedRecord* selected_;

  QTabWidget* tabs_ = nullptr;
  RecordFilterBar* filterBar_ = nullptr;
  RecordTableView* recordsView_ = nullptr;
  RecordTableView* attentionView_ = nullptr;
  RecordDetailView* detail_ = nullptr;
  QLabel* attentionHeader_ = nullptr;
  ReconciliationView* reconciliation_ = nullptr;
  OverchargesView* overcharges_ = nullptr;
  TraceAuditView* traceAudit_ = nullptr;
  RefreshStamp* recordsStamp_ = nullptr;
  RefreshStamp* attentionStamp_ = nullptr;

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
  QAction* filterAction_ = nullptr;
  QAction* copyKeyAction_ = nullptr;
  QAction* quitAction_ = nullptr;

  QTimer refreshTimer_;
  QTimer leaseTimer_;  // runs while the selected record's lease is live
  RequestTracker countsRequests_{this};
  UnsettledCounts counts_;
  bool haveCounts_ = false;
  QPointer<SettleDialog> settleDialog_;

  void buildTimelineAndBulkSettle();
  TimelinePane* timeline_ = nullptr;
  QAction* bulkSettleAction_ = nullptr;
  QAction* bulkSettleMatchingAction_ = nullptr;
};

}  // namespace idem::admin

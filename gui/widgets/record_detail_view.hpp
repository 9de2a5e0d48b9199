// Everything about the selected record on one pane: its fields, the history as a timeline, the
// attempts under its key, the fund flows of its business object (duplicates highlighted) and the
// request and response payloads as indented JSON.
#pragma once

#include <QWidget>

class QAction;
class QFormLayout;
class QHBoxLayout;
class QLabel;
class QPlainTextEdit;
class QStackedWidget;
class QTabWidget;
class QToolButton;
class QTreeView;

namespace idem::admin {

class SelectedRecord;

class RecordDetailView : public QWidget {
  Q_OBJECT

 public:
  RecordDetailView(SelectedRecord* selected, QAction* settleAction, QWidget* parent = nullptr);

  QTabWidget* tabs() const { return tabs_; }
  QTreeView* timelineView() const { return timeline_; }
  QTreeView* attemptsView() const { return attempts_; }
  QTreeView* fundFlowsView() const { return fundFlows_; }
  QString fieldText(const QString& field) const;  // for tests: the shown value of a field
  // One line beside the Settle button: why it is disabled (a live lease: `blocked`) or what it
  // offers (a correction). Empty hides it.
  void setSettleHint(const QString& text, bool blocked);
  QString settleHint() const;

 private:
  QHBoxLayout* buildHeader(QAction* settleAction);
  QWidget* buildFields(QWidget* page);
  void buildEvidenceTabs();
  void updateFromRecord();
  QLabel* addField(QFormLayout* form, const QString& name, const QString& label);

  SelectedRecord* selected_;
  QStackedWidget* stack_;
  QLabel* placeholder_;
  QLabel* title_;
  QLabel* status_;
  QToolButton* settleButton_;
  QLabel* settleHint_;
  QTabWidget* tabs_;
  QTreeView* timeline_;
  QTreeView* attempts_;
  QTreeView* fundFlows_;
  QPlainTextEdit* request_;
  QPlainTextEdit* response_;
  QList<QLabel*> fields_;
};

}  // namespace idem::admin

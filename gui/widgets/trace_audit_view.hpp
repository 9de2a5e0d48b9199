// The Trace audit tab: everything one trace (or one agent) did, across all its keys, in time
// order: each attempt with its source, outcome and key, and the transitions and fund flows they
// led to (idem.trace_story). The seeds' audit question answered on one screen: which request came
// first, where it timed out, who triggered the retry, whether both carried the same key.
#pragma once

#include <QWidget>
#include <optional>

#include "models/request_tracker.hpp"
#include "models/trace_story_model.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTreeView;

namespace idem::admin {

class DatabaseSession;
class RefreshStamp;

class TraceAuditView : public QWidget {
  Q_OBJECT

 public:
  TraceAuditView(DatabaseSession* session, QWidget* parent = nullptr);

  TraceStoryModel* model() { return &model_; }
  QTreeView* table() const { return table_; }
  QLineEdit* searchField() const { return search_; }
  RefreshStamp* stamp() const { return stamp_; }
  bool isLoading() const { return requests_.isRunning(); }
  const QString& lastError() const { return lastError_; }

  // Shows the story of this trace or agent (the same as typing it and pressing Search).
  void search(StorySubject subject, const QString& id);
  // Re-reads the story shown; nothing before the first search.
  void refresh();

 signals:
  // The selected event belongs to this business object: the timeline's input (MainWindow hands
  // it on; see MainWindow::showBusinessObjectStory).
  void businessObjectSelected(const QString& bizType, const QString& bizId);

 private:
  void searchTyped();
  void onEvents(const std::vector<StoryEvent>& events);

  DatabaseSession* session_;
  TraceStoryModel model_;
  RequestTracker requests_{this};
  std::optional<StoryQuery> query_;
  QString lastError_;
  QComboBox* subject_;
  QLineEdit* search_;
  QPushButton* searchButton_;
  QLabel* summary_;
  RefreshStamp* stamp_;
  QTreeView* table_;
};

}  // namespace idem::admin

// The story as a picture: one business object's attempts, transitions, fund flows and lease
// expiries on a time axis, one lane per idempotency key, so an operator sees in one look that the
// LLM retried 4 s after a gateway timeout under a new key and the gateway charged twice. Each event
// is exactly one TimelineMark (hover: the whole row), coloured from the status palette; retries are
// labelled by their trigger source and the time since the event before. Exportable as PNG.
//
// TimelineView draws a BusinessObjectStory; TimelinePane reads it (idem.business_object_story, on
// the worker) for the business object it is shown, with a header and the export button.
#pragma once

#include <QGraphicsPathItem>
#include <QGraphicsView>
#include <QImage>
#include <QWidget>

#include "models/request_tracker.hpp"
#include "models/timeline_events.hpp"

class QLabel;
class QPushButton;

namespace idem::admin {

class DatabaseSession;

// One event of the story on the picture.
class TimelineMark : public QGraphicsPathItem {
 public:
  enum { Type = QGraphicsItem::UserType + 71 };
  // data(kRowData): the event's row in the story; data(kKindData): its StoryEventKind as int.
  static constexpr int kRowData = 0;
  static constexpr int kKindData = 1;

  TimelineMark(const QPainterPath& shape, int row, StoryEventKind kind);
  int type() const override { return Type; }
  int row() const { return data(kRowData).toInt(); }
};

class TimelineView : public QGraphicsView {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);

  void setStory(BusinessObjectStory story);
  const BusinessObjectStory& story() const { return story_; }
  // In story order.
  QList<TimelineMark*> marks() const { return marks_; }
  // The y of each lane's axis line, in lane order (TimelineLayout::lanes()).
  const QList<qreal>& laneYs() const { return laneYs_; }

  // The whole scene at its own size, on white.
  QImage toImage() const;
  bool exportPng(const QString& path) const;

 private:
  void rebuild();

  BusinessObjectStory story_;
  QGraphicsScene* scene_;
  QList<TimelineMark*> marks_;
  QList<qreal> laneYs_;
};

class TimelinePane : public QWidget {
  Q_OBJECT

 public:
  explicit TimelinePane(DatabaseSession* session, QWidget* parent = nullptr);

  TimelineView* view() const { return view_; }
  const std::string& bizType() const { return bizType_; }
  const std::string& bizId() const { return bizId_; }
  bool isLoading() const { return requests_.isRunning(); }
  bool exportPng(const QString& path) const { return view_->exportPng(path); }

 public slots:
  // Reads and draws the story of that business object.
  void showBusinessObject(const QString& bizType, const QString& bizId);
  // Re-reads the story shown (after a refresh tick or a settle); redraws only if it changed.
  void refresh();

 signals:
  void storyShown();

 private:
  void onStory(const BusinessObjectStory& story);
  void exportToFile();

  DatabaseSession* session_;
  RequestTracker requests_{this};
  std::string bizType_;
  std::string bizId_;
  QLabel* header_;
  QPushButton* export_;
  TimelineView* view_;
};

}  // namespace idem::admin

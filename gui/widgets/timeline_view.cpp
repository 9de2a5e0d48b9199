#include "widgets/timeline_view.hpp"

#include <QFileDialog>
#include <QFontMetricsF>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QVBoxLayout>

#include "models/database_session.hpp"
#include "models/status_palette.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

constexpr qreal kLaneLabelWidth = 230;
constexpr qreal kLaneHeight = 96;
constexpr qreal kTop = 34;
constexpr qreal kMarkRadius = 7;
constexpr qreal kMargin = 16;
constexpr qreal kMinPlotWidth = 900;
constexpr qreal kPlotWidthPerEvent = 18;

QPainterPath markShape(StoryEventKind kind) {
  const qreal r = kMarkRadius;
  QPainterPath p;
  switch (kind) {
    case StoryEventKind::Attempt:
      p.addEllipse(QPointF(0, 0), r, r);
      break;
    case StoryEventKind::Transition:
      p.addRect(-r, -r, 2 * r, 2 * r);
      break;
    case StoryEventKind::FundFlow:  // a diamond
      p.moveTo(0, -r - 2);
      p.lineTo(r + 2, 0);
      p.lineTo(0, r + 2);
      p.lineTo(-r - 2, 0);
      p.closeSubpath();
      break;
    case StoryEventKind::LeaseExpiry:  // an hourglass: time ran out
      p.moveTo(-r, -r);
      p.lineTo(r, -r);
      p.lineTo(-r, r);
      p.lineTo(r, r);
      p.closeSubpath();
      break;
  }
  return p;
}

// "+4.0 s" since the event before: how long the retry waited.
QString gapText(std::chrono::microseconds gap) {
  const double seconds = static_cast<double>(gap.count()) / 1e6;
  if (seconds < 1) return QStringLiteral("+%1 ms").arg(seconds * 1000, 0, 'f', 0);
  return QStringLiteral("+%1 s").arg(seconds, 0, 'f', 1);
}

// Keys elide from the left: their distinctive end shows.
QString laneTitle(const std::string& key, const QFont& font) {
  const QString title = key.empty() ? QStringLiteral("(flows without a key)") : fromUtf8(key);
  return QFontMetricsF(font).elidedText(title, Qt::ElideLeft, kLaneLabelWidth - 2 * kMargin);
}

}  // namespace

TimelineMark::TimelineMark(const QPainterPath& shape, int row, StoryEventKind kind)
    : QGraphicsPathItem(shape) {
  setData(kRowData, row);
  setData(kKindData, static_cast<int>(kind));
  setAcceptHoverEvents(true);
  setZValue(2);
}

TimelineView::TimelineView(QWidget* parent)
    : QGraphicsView(parent), scene_(new QGraphicsScene(this)) {
  setObjectName(QStringLiteral("timelineView"));
  setScene(scene_);
  setRenderHint(QPainter::Antialiasing);
  setAlignment(Qt::AlignLeft | Qt::AlignTop);
  setBackgroundBrush(Qt::white);
  setDragMode(QGraphicsView::ScrollHandDrag);
}

void TimelineView::setStory(BusinessObjectStory story) {
  story_ = std::move(story);
  rebuild();
}

void TimelineView::rebuild() {
  scene_->clear();
  marks_.clear();
  laneYs_.clear();
  const TimelineLayout layout(story_);
  const QFont font = this->font();
  QFont bold = font;
  bold.setBold(true);
  const qreal plotWidth =
      std::max(kMinPlotWidth, kPlotWidthPerEvent * static_cast<qreal>(story_.events.size()));
  const qreal left = kLaneLabelWidth;
  const QColor axisColour = toneColor(Tone::MutedText);

  auto* title = scene_->addSimpleText(
      story_.events.empty()
          ? QStringLiteral("%1/%2: nothing recorded")
                .arg(fromUtf8(story_.bizType), fromUtf8(story_.bizId))
          : QStringLiteral("%1/%2: %3 events, %4 keys%5")
                .arg(fromUtf8(story_.bizType), fromUtf8(story_.bizId))
                .arg(story_.events.size())
                .arg(layout.lanes().size())
                .arg(story_.truncated ? QStringLiteral(" (the first only)") : QString()),
      bold);
  title->setPos(kMargin, 8);

  const int laneCount = static_cast<int>(layout.lanes().size());
  for (int i = 0; i < laneCount; ++i) {
    const qreal y = kTop + kLaneHeight * (i + 0.5);
    laneYs_ << y;
    if (i % 2 == 1) {
      scene_
          ->addRect(0, y - kLaneHeight / 2, left + plotWidth + kMargin, kLaneHeight, Qt::NoPen,
                    QColor(0xF5, 0xF5, 0xF5))
          ->setZValue(-2);
    }
    scene_->addLine(left, y, left + plotWidth, y, QPen(axisColour, 1, Qt::DotLine));
    const std::string& key = layout.lanes()[static_cast<std::size_t>(i)];
    auto* label = scene_->addSimpleText(laneTitle(key, font), font);
    label->setPos(kMargin, y - label->boundingRect().height() / 2);
    label->setToolTip(fromUtf8(key));
  }

  // The time axis under the lanes, with round ticks.
  const qreal axisY = kTop + kLaneHeight * laneCount + 8;
  scene_->addLine(left, axisY, left + plotWidth, axisY, QPen(axisColour, 1));
  for (Timestamp t : layout.ticks()) {
    const qreal x = left + layout.xOf(t, plotWidth);
    scene_->addLine(x, axisY, x, axisY + 5, QPen(axisColour, 1));
    scene_->addLine(x, kTop, x, axisY, QPen(QColor(0xE0, 0xE0, 0xE0), 1))->setZValue(-1);
    auto* tick = scene_->addSimpleText(layout.tickLabel(t), font);
    tick->setBrush(axisColour);
    tick->setPos(x - tick->boundingRect().width() / 2, axisY + 7);
  }
  // The legend draws the marks' own shapes (plain path items, not marks: they are not events).
  qreal legendX = left;
  for (const auto& [kind, name] : {std::pair{StoryEventKind::Attempt, "attempt"},
                                   std::pair{StoryEventKind::Transition, "transition"},
                                   std::pair{StoryEventKind::FundFlow, "fund flow"},
                                   std::pair{StoryEventKind::LeaseExpiry, "lease expiry"}}) {
    auto* shape = scene_->addPath(markShape(kind), QPen(axisColour), QBrush(axisColour));
    shape->setScale(0.8);
    shape->setPos(legendX + kMarkRadius, axisY + 38);
    auto* text = scene_->addSimpleText(QString::fromLatin1(name), font);
    text->setBrush(axisColour);
    text->setPos(legendX + 2 * kMarkRadius + 6, axisY + 38 - text->boundingRect().height() / 2);
    legendX += 2 * kMarkRadius + 18 + text->boundingRect().width();
  }
  auto* hover = scene_->addSimpleText(QStringLiteral("(hover a mark for the whole row)"), font);
  hover->setBrush(axisColour);
  hover->setPos(legendX + 8, axisY + 38 - hover->boundingRect().height() / 2);

  // The marks, one per event. Each label takes the first free place of four (above, below, then
  // one line further out on each side), so labels of events close in time do not cover each other.
  std::vector<std::vector<QRectF>> taken(static_cast<std::size_t>(laneCount));
  for (int row = 0; row < static_cast<int>(story_.events.size()); ++row) {
    const StoryEvent& e = story_.events[static_cast<std::size_t>(row)];
    const int lane = layout.laneOf(e);
    const qreal x = left + layout.xOf(e.at, plotWidth);
    const qreal y = laneYs_[lane];
    auto* mark = new TimelineMark(markShape(e.kind), row, e.kind);
    const QColor colour = eventColour(e);
    mark->setBrush(colour);
    mark->setPen(QPen(colour.darker(140), 1));
    mark->setPos(x, y);
    mark->setToolTip(eventDetail(e));
    scene_->addItem(mark);
    marks_ << mark;

    QString text = eventLabel(e);
    if (e.kind == StoryEventKind::Attempt && e.source && *e.source != TriggerSource::Initial &&
        row > 0) {
      text += QStringLiteral(" ") + gapText(e.at - story_.events[row - 1].at);
    }
    auto* label = new QGraphicsSimpleTextItem(text, mark);
    label->setFont(e.kind == StoryEventKind::Attempt ? font : bold);
    label->setBrush(colour.darker(120));
    const QRectF box = label->boundingRect();
    const qreal h = box.height();
    const qreal places[] = {-kMarkRadius - 4 - h, kMarkRadius + 4, -kMarkRadius - 6 - 2 * h,
                            kMarkRadius + 6 + h};
    std::vector<QRectF>& used = taken[static_cast<std::size_t>(lane)];
    qreal dy = places[0];
    for (qreal place : places) {
      const QRectF at(x - box.width() / 2, y + place, box.width(), h);
      if (std::none_of(used.begin(), used.end(),
                       [&](const QRectF& r) { return r.intersects(at); })) {
        dy = place;
        break;
      }
    }
    used.emplace_back(x - box.width() / 2, y + dy, box.width(), h);
    label->setPos(-box.width() / 2, dy);
  }
  scene_->setSceneRect(0, 0, left + plotWidth + 2 * kMargin, axisY + 56);
}

QImage TimelineView::toImage() const {
  const QSize size = scene_->sceneRect().size().toSize();
  QImage image(size, QImage::Format_ARGB32);
  image.fill(Qt::white);
  QPainter painter(&image);
  painter.setRenderHint(QPainter::Antialiasing);
  scene_->render(&painter, QRectF(QPointF(0, 0), size), scene_->sceneRect());
  painter.end();
  return image;
}

bool TimelineView::exportPng(const QString& path) const {
  return toImage().save(path, "PNG");
}

TimelinePane::TimelinePane(DatabaseSession* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      header_(new QLabel(this)),
      export_(new QPushButton(QStringLiteral("Export PNG\u2026"), this)),
      view_(new TimelineView(this)) {
  setObjectName(QStringLiteral("timelinePane"));
  header_->setObjectName(QStringLiteral("timelineHeader"));
  // Markup of ours around data escaped: a biz_id a writer chose never turns into markup.
  header_->setTextFormat(Qt::RichText);
  header_->setText(QStringLiteral("Select a record to draw the story of its business object."));
  export_->setObjectName(QStringLiteral("timelineExport"));
  export_->setEnabled(false);
  connect(export_, &QPushButton::clicked, this, &TimelinePane::exportToFile);

  auto* top = new QHBoxLayout;
  top->addWidget(header_, 1);
  top->addWidget(export_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  layout->addWidget(view_, 1);
}

void TimelinePane::showBusinessObject(const QString& bizType, const QString& bizId) {
  bizType_ = bizType.toStdString();
  bizId_ = bizId.toStdString();
  header_->setText(QStringLiteral("Reading the story of %1/%2\u2026")
                       .arg(bizType.toHtmlEscaped(), bizId.toHtmlEscaped()));
  view_->setStory({bizType_, bizId_, {}, false});
  export_->setEnabled(false);
  refresh();
}

void TimelinePane::refresh() {
  if (bizType_.empty()) return;
  session_->submit(
      requests_, "read the business object's story",
      [type = bizType_, id = bizId_](pqxx::connection& c) {
        return readBusinessObjectStory(c, type, id);
      },
      [this](const BusinessObjectStory& story) { onStory(story); },
      [this](const RequestError& e) {
        header_->setText(
            QStringLiteral("<span style=\"color:%1;\">%2</span>")
                .arg(toneCss(Tone::ErrorText), QString::fromUtf8(e.what()).toHtmlEscaped()));
      });
}

void TimelinePane::onStory(const BusinessObjectStory& story) {
  const auto sameEvents = [](const BusinessObjectStory& a, const BusinessObjectStory& b) {
    return a.bizType == b.bizType && a.bizId == b.bizId &&
           std::equal(a.events.begin(), a.events.end(), b.events.begin(), b.events.end(),
                      [](const StoryEvent& x, const StoryEvent& y) {
                        return x.kind == y.kind && x.eventId == y.eventId;
                      });
  };
  // A refresh that found nothing new keeps the picture (and the operator's scroll) as it is.
  if (!sameEvents(story, view_->story()) || view_->marks().isEmpty()) view_->setStory(story);
  header_->setText(
      QStringLiteral("<b>%1/%2</b>: every key's attempts, transitions and fund flows, oldest left")
          .arg(fromUtf8(story.bizType).toHtmlEscaped(), fromUtf8(story.bizId).toHtmlEscaped()));
  export_->setEnabled(!story.events.empty());
  emit storyShown();
}

void TimelinePane::exportToFile() {
  const QString suggested = QStringLiteral("timeline-%1-%2.png")
                                .arg(fromUtf8(bizType_), fromUtf8(bizId_))
                                .replace(QLatin1Char('/'), QLatin1Char('_'));
  const QString path = QFileDialog::getSaveFileName(
      this, QStringLiteral("Export the timeline"), suggested, QStringLiteral("PNG images (*.png)"));
  if (path.isEmpty()) return;
  if (!exportPng(path)) {
    header_->setText(QStringLiteral("<span style=\"color:%1;\">Cannot write %2</span>")
                         .arg(toneCss(Tone::ErrorText), path.toHtmlEscaped()));
  }
}

}  // namespace idem::admin

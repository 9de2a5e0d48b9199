// A business object's story as the timeline draws it: every row of idem.business_object_story
// (sql/migrations/012), attempts, transitions and fund flows of every key of the object in time
// order, and where each goes on the picture: one lane per idempotency key, a time axis with round
// ticks. No widgets here; the view (widgets/timeline_view) turns each event into one mark.
#pragma once

#include <QColor>
#include <QString>
#include <chrono>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/story_event.hpp"

namespace idem::admin {

struct BusinessObjectStory {
  std::string bizType;
  std::string bizId;
  std::vector<StoryEvent>
      events;              // in the function's order: time, then attempt < transition < flow
  bool truncated = false;  // the limit cut it
};

inline constexpr int kStoryLimit = 5000;

// idem.business_object_story(bizType, bizId, limit), on the worker thread.
BusinessObjectStory readBusinessObjectStory(pqxx::connection& c, const std::string& bizType,
                                            const std::string& bizId, int limit = kStoryLimit);

// The mark's short label on the picture: "first try", a retry's source ("llm retry"), the status
// it moved to, "lease expired", a flow's kind and amount.
QString eventLabel(const StoryEvent& e);
// Everything the row says, for the mark's tooltip.
QString eventDetail(const StoryEvent& e);
// The mark's colour, from the status palette: attempts by outcome, transitions by the status they
// reached, money moving (DEBIT, CAPTURE) in the money-moved tone.
QColor eventColour(const StoryEvent& e);

// Where the events go: lanes by key in order of first appearance, x by time.
class TimelineLayout {
 public:
  // At most `mostTicks` ticks on the axis.
  explicit TimelineLayout(const BusinessObjectStory& story, int mostTicks = 10);

  const std::vector<std::string>& lanes() const { return lanes_; }
  int laneOf(const StoryEvent& e) const;
  Timestamp first() const { return first_; }
  Timestamp last() const { return last_; }
  // 0 .. width for first() .. last(); every event in the middle when they all share one instant.
  double xOf(Timestamp at, double width) const;
  // Round instants (1 ms, 2 ms, 5 ms ... 1 h steps) inside [first, last].
  std::vector<Timestamp> ticks() const;
  // A tick's label, as precise as the step needs ("10:02:03", "10:02:03.250").
  QString tickLabel(Timestamp t) const;

 private:
  std::vector<std::string> lanes_;
  Timestamp first_{};
  Timestamp last_{};
  std::chrono::microseconds step_{0};
};

}  // namespace idem::admin

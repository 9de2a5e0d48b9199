// The colours of the domain's values, the same in every table and dialog. Statuses: PROCESSING
// amber (in flight, may become stuck), UNKNOWN red-orange (needs a person), SUCCESS green, FAILED
// grey. Actor kinds: a person's decision (operator) and an evidence-based one (reconciler) stand
// out from the protocol's own changes (system). Attempt outcomes: the answers that mean something
// is off (payload_mismatch, rejected) in red-orange, a retired key (retention removed its record,
// the layer refused to run it again) in violet.
#pragma once

#include <QColor>
#include <QString>

#include "idem/vocabulary.hpp"

namespace idem::admin {

QColor statusBackground(RecordStatus status);
QColor statusForeground(RecordStatus status);
// A "#rrggbb" pair for rich text badges.
QString statusBadgeHtml(RecordStatus status);

// Invalid (the view's default) for the kinds and outcomes drawn in the ordinary text colour.
QColor actorKindForeground(ActorKind kind);
QColor outcomeForeground(Outcome outcome);

// One sentence for a tooltip: what the value means to an operator.
QString actorKindMeaning(ActorKind kind);
QString outcomeMeaning(Outcome outcome);

// Fund flows that duplicate an earlier one of the same kind: a double charge.
QColor duplicateFlowBackground();

}  // namespace idem::admin

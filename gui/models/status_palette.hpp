// The colours of the domain's values, the same in every table and dialog. Statuses: PROCESSING
// amber (in flight, may become stuck), UNKNOWN red-orange (needs a person), SUCCESS green, FAILED
// grey. Actor kinds: a person's decision (operator) and an evidence-based one (reconciler) stand
// out from the protocol's own changes (system). Attempt outcomes: the answers that mean something
// is off (payload_mismatch, rejected) in red-orange, a retired key (retention removed its record,
// the layer refused to run it again) in violet.
//
// Every other colour of the console is a Tone, named by what it tells the operator; a tone that
// means what a status means is that status's colour. Widgets take their colours from here only.
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

enum class Tone {
  MutedText,          // nothing going on: not connected
  Healthy,            // connected
  Warning,            // under way or worth a second look: connecting, a warning's border
  WarningBackground,  // behind a warning that does not block
  Alarm,              // broken: disconnected, a failed read, a blocking warning's border
  AlarmBackground,    // behind a warning that blocks
  ErrorText,          // a refusal or a failure, worded for the operator to read
  Waiting,            // PROCESSING's: past its lease, read-only, settling must wait
  WaitingBackground,  // PROCESSING's background
  NeedsPerson,        // UNKNOWN's: unknown records, an expired lease
  MoneyMoved,         // UNKNOWN's: money moved for the business object
  Settleable,         // SUCCESS's: the record can be settled now
};

QColor toneColor(Tone tone);
// "#rrggbb", for style sheets and rich text.
QString toneCss(Tone tone);

}  // namespace idem::admin

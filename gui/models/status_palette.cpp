#include "models/status_palette.hpp"

#include <QString>

#include "models/utf8_text.hpp"

namespace idem::admin {

QColor statusBackground(RecordStatus status) {
  switch (status) {
    case RecordStatus::Processing:
      return QColor(0xFF, 0xE3, 0xA3);
    case RecordStatus::Unknown:
      return QColor(0xFF, 0xC4, 0xB0);
    case RecordStatus::Success:
      return QColor(0xD3, 0xEE, 0xD3);
    case RecordStatus::Failed:
      return QColor(0xE2, 0xE2, 0xE2);
  }
  return {};
}

QColor statusForeground(RecordStatus status) {
  switch (status) {
    case RecordStatus::Processing:
      return QColor(0x7A, 0x4E, 0x00);
    case RecordStatus::Unknown:
      return QColor(0xA3, 0x25, 0x00);
    case RecordStatus::Success:
      return QColor(0x1B, 0x5E, 0x20);
    case RecordStatus::Failed:
      return QColor(0x4A, 0x4A, 0x4A);
  }
  return {};
}

QString statusBadgeHtml(RecordStatus status) {
  return QStringLiteral(
             "<span style=\"background-color:%1; color:%2; "
             "font-weight:600;\">&nbsp;%3&nbsp;</span>")
      .arg(statusBackground(status).name(), statusForeground(status).name(),
           fromUtf8(format(status)));
}

QColor actorKindForeground(ActorKind kind) {
  switch (kind) {
    case ActorKind::System:
      return {};
    case ActorKind::Operator:
      return QColor(0x0D, 0x47, 0xA1);
    case ActorKind::Reconciler:
      return QColor(0x00, 0x69, 0x5C);
  }
  return {};
}

QColor outcomeForeground(Outcome outcome) {
  switch (outcome) {
    case Outcome::Executed:
    case Outcome::Replayed:
    case Outcome::InProgress:
      return {};
    case Outcome::PayloadMismatch:
    case Outcome::Rejected:
      return QColor(0xA3, 0x25, 0x00);
    case Outcome::Retired:
      return QColor(0x6A, 0x1B, 0x9A);
  }
  return {};
}

QString actorKindMeaning(ActorKind kind) {
  switch (kind) {
    case ActorKind::System:
      return QStringLiteral("the protocol functions: a claim, its answer, an expired lease");
    case ActorKind::Operator:
      return QStringLiteral("a person's decision through idem.settle, with a reason");
    case ActorKind::Reconciler:
      return QStringLiteral(
          "an evidence-based decision through idem.resolve or idem.reconcile (a gateway lookup, "
          "a fund flow under this key)");
  }
  return {};
}

QString outcomeMeaning(Outcome outcome) {
  switch (outcome) {
    case Outcome::Executed:
      return QStringLiteral("the caller claimed the record and had to call downstream");
    case Outcome::Replayed:
      return QStringLiteral(
          "the outcome was final: the stored response (or final error) was "
          "replayed, nothing ran");
    case Outcome::InProgress:
      return QStringLiteral("someone was on it, or the result was unknown: not run");
    case Outcome::PayloadMismatch:
      return QStringLiteral("same key, different request: the caller changed its arguments");
    case Outcome::Rejected:
      return QStringLiteral(
          "the business object already succeeded, is in flight under another "
          "key, or money already moved for it: not run");
    case Outcome::Retired:
      return QStringLiteral(
          "the key was used before and retention has since removed its record: "
          "not run again");
  }
  return {};
}

QColor duplicateFlowBackground() {
  return QColor(0xFF, 0xC9, 0xC9);
}

QColor toneColor(Tone tone) {
  switch (tone) {
    case Tone::MutedText:
      return QColor(0x88, 0x88, 0x88);
    case Tone::Healthy:
      return QColor(0x2E, 0x7D, 0x32);
    case Tone::Warning:
      return QColor(0xC9, 0x8A, 0x00);
    case Tone::WarningBackground:
      return QColor(0xFF, 0xF0, 0xC2);
    case Tone::Alarm:
      return QColor(0xC6, 0x28, 0x28);
    case Tone::AlarmBackground:
      return QColor(0xFF, 0xD6, 0xCC);
    case Tone::ErrorText:
      return QColor(0xB7, 0x1C, 0x1C);
    case Tone::Waiting:
      return statusForeground(RecordStatus::Processing);
    case Tone::WaitingBackground:
      return statusBackground(RecordStatus::Processing);
    case Tone::NeedsPerson:
    case Tone::MoneyMoved:
      return statusForeground(RecordStatus::Unknown);
    case Tone::Settleable:
      return statusForeground(RecordStatus::Success);
  }
  return {};
}

QString toneCss(Tone tone) {
  return toneColor(tone).name();
}

}  // namespace idem::admin

#include "models/settle_availability.hpp"

#include "models/age_text.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

// Rounded up, so "in 0 s" is never shown while the lease still runs.
QString remaining(std::chrono::microseconds left) {
  return ageText(left + std::chrono::microseconds(999'999));
}

}  // namespace

SettleAvailability settleAvailability(const Record& record, Timestamp serverNow) {
  SettleAvailability out;
  const QString key = fromUtf8(record.idempotencyKey);
  switch (record.status) {
    case RecordStatus::Processing:
      if (record.leaseExpiresAt && *record.leaseExpiresAt > serverNow) {
        out.leaseEndsAt = record.leaseExpiresAt;
        out.explanation = QStringLiteral(
                              "The lease of %1 runs until %2 (in %3): its claimant may still "
                              "answer. It can be settled once the lease expires.")
                              .arg(key, displayTime(*record.leaseExpiresAt),
                                   remaining(*record.leaseExpiresAt - serverNow));
        return out;
      }
      out.allowed = true;
      out.explanation =
          QStringLiteral("Decide the outcome of %1: PROCESSING past its lease (Ctrl+S)").arg(key);
      return out;
    case RecordStatus::Unknown:
      out.allowed = true;
      out.explanation = QStringLiteral("Decide the outcome of %1 (Ctrl+S)").arg(key);
      return out;
    case RecordStatus::Failed:
      out.allowed = true;
      out.correction = true;
      out.explanation =
          QStringLiteral("Correct %1 to SUCCESS: the money moved after all (Ctrl+S)").arg(key);
      return out;
    case RecordStatus::Success:
      out.explanation =
          QStringLiteral("%1 is SUCCESS, which is final: there is nothing to settle").arg(key);
      return out;
  }
  out.explanation = QStringLiteral("%1 is %2").arg(key, fromUtf8(format(record.status)));
  return out;
}

bool offersTarget(RecordStatus from, RecordStatus to) {
  if (to != RecordStatus::Success && to != RecordStatus::Failed) return false;
  if (from == RecordStatus::Failed) return to == RecordStatus::Success;
  return isUnsettled(from);
}

}  // namespace idem::admin

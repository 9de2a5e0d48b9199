#include "models/settle_availability.hpp"

#include <QStringList>
#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "models/age_text.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

constexpr const char* kOperatorMoves =
    "SELECT f, t FROM unnest($1::text[]) AS f, unnest($1::text[]) AS t "
    "WHERE idem.transition_allowed(f, t, 'operator')";

// Rounded up, so "in 0 s" is never shown while the lease still runs.
QString remaining(std::chrono::microseconds left) {
  return ageText(left + std::chrono::microseconds(999'999));
}

}  // namespace

bool OperatorMoves::anyFrom(RecordStatus from) const {
  for (RecordStatus to : allValues<RecordStatus>()) {
    if (allows(from, to)) return true;
  }
  return false;
}

OperatorMoves readOperatorMoves(pqxx::transaction_base& tx) {
  return translatingErrors("read the state machine", [&] {
    // The statuses are plain words: an array literal needs no quoting.
    std::string statuses = "{";
    for (RecordStatus s : allValues<RecordStatus>()) {
      if (statuses.size() > 1) statuses.push_back(',');
      statuses.append(format(s));
    }
    statuses += "}";
    OperatorMoves moves;
    for (const pqxx::row& r : tx.exec_params(kOperatorMoves, statuses)) {
      moves.allow(parse<RecordStatus>(r[0].c_str()), parse<RecordStatus>(r[1].c_str()));
    }
    return moves;
  });
}

SettleAvailability settleAvailability(const Record& record, Timestamp serverNow,
                                      const OperatorMoves& moves) {
  SettleAvailability out;
  const QString key = fromUtf8(record.idempotencyKey);
  const QString status = fromUtf8(format(record.status));
  if (!moves.anyFrom(record.status)) {
    out.explanation =
        QStringLiteral("%1 is %2, which is final: there is nothing to settle").arg(key, status);
    return out;
  }
  if (record.status == RecordStatus::Processing && record.leaseExpiresAt &&
      *record.leaseExpiresAt > serverNow) {
    out.leaseEndsAt = record.leaseExpiresAt;
    out.explanation = QStringLiteral(
                          "The lease of %1 runs until %2 (in %3): its claimant may still "
                          "answer. It can be settled once the lease expires.")
                          .arg(key, displayTime(*record.leaseExpiresAt),
                               remaining(*record.leaseExpiresAt - serverNow));
    return out;
  }
  out.allowed = true;
  if (!isUnsettled(record.status)) {
    out.correction = true;
    QStringList targets;
    for (RecordStatus to : allValues<RecordStatus>()) {
      if (moves.allows(record.status, to)) targets << fromUtf8(format(to));
    }
    out.explanation = QStringLiteral(
                          "Correct %1 from %2 to %3: the side effect happened after "
                          "all (Ctrl+S)")
                          .arg(key, status, targets.join(QStringLiteral(" or ")));
  } else if (record.status == RecordStatus::Processing) {
    out.explanation =
        QStringLiteral("Decide the outcome of %1: PROCESSING past its lease (Ctrl+S)").arg(key);
  } else {
    out.explanation = QStringLiteral("Decide the outcome of %1 (Ctrl+S)").arg(key);
  }
  return out;
}

}  // namespace idem::admin

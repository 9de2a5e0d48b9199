#include "models/gateway_evidence_text.hpp"

#include <QJsonDocument>
#include <QJsonObject>

#include "idem/vocabulary.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

QString text(const QJsonObject& o, const char* name) {
  const QJsonValue v = o.value(QLatin1String(name));
  if (v.isString()) return v.toString();
  if (v.isDouble()) return QString::number(v.toInteger());
  return {};
}

// "txn_123 (day.csv, line 7)", as much of it as the evidence names.
QString lineText(const QJsonObject& o) {
  QString line = text(o, "line_id");
  if (line.isEmpty()) line = text(o, "ref");
  const QString file = text(o, "file");
  const QString at = text(o, "source_line");
  if (!file.isEmpty() && !at.isEmpty()) {
    line += QStringLiteral(" (%1, line %2)").arg(file, at);
  } else if (!file.isEmpty()) {
    line += QStringLiteral(" (%1)").arg(file);
  }
  return line;
}

QString event(const QJsonObject& o) {
  const QString id = text(o, "event_id");
  return id.isEmpty() ? text(o, "ref") : id;
}

QString what(EvidenceSource source, const QJsonObject& o) {
  const QString gateway = text(o, "gateway");
  switch (source) {
    case EvidenceSource::Statement: {
      QString s = QStringLiteral("by %1's statement line %2").arg(gateway, lineText(o));
      if (o.value(QStringLiteral("accepted_proposal")).toBool()) {
        s += QStringLiteral(", a proposed match a person accepted");
      }
      return s;
    }
    case EvidenceSource::Callback:
      return QStringLiteral("by a callback %1 from %2").arg(event(o), gateway);
    case EvidenceSource::Lookup: {
      const QString answer = event(o);
      return answer.isEmpty()
                 ? QStringLiteral("by the status lookup at %1").arg(gateway)
                 : QStringLiteral("by the status lookup at %1 (answer %2)").arg(gateway, answer);
    }
    case EvidenceSource::StatementAbsence: {
      QString s = QStringLiteral("absent from %1's final statements").arg(gateway);
      const QString periods = text(o, "periods");
      if (!periods.isEmpty()) s += QStringLiteral(" for %1").arg(periods);
      const QString delay = text(o, "settlement_delay");
      if (!delay.isEmpty()) s += QStringLiteral(", settlement delay %1").arg(delay);
      return s;
    }
    case EvidenceSource::Claimant:
    case EvidenceSource::Ledger:
    case EvidenceSource::Operator:
      return {};
  }
  return {};
}

}  // namespace

QString gatewayEvidenceSentence(const Transition& transition) {
  if (!transition.evidence) return {};
  const QJsonDocument doc =
      QJsonDocument::fromJson(QByteArray::fromStdString(*transition.evidence));
  if (!doc.isObject()) return {};
  const QJsonObject o = doc.object();
  const std::optional<EvidenceSource> source =
      tryParse<EvidenceSource>(o.value(QStringLiteral("source")).toString().toStdString());
  if (!source) return {};
  const QString how = what(*source, o);
  if (how.isEmpty()) return {};
  const QString verb = transition.actorKind == ActorKind::Operator ? QStringLiteral("settled")
                                                                   : QStringLiteral("resolved");
  const QString status = fromUtf8(format(transition.toStatus));
  if (*source == EvidenceSource::StatementAbsence) {
    return QStringLiteral("%1 %2: %3").arg(verb, status, how);
  }
  return QStringLiteral("%1 %2 %3").arg(verb, status, how);
}

}  // namespace idem::admin

#include "models/settle_evidence.hpp"

#include <QJsonDocument>
#include <QJsonObject>

namespace idem::admin {

EvidenceResult buildEvidence(const EvidenceInput& input) {
  EvidenceResult out;
  const QString reference = input.gatewayReference.trimmed();
  const QString text = input.json.trimmed();
  QJsonObject object;
  if (!text.isEmpty()) {
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError) {
      out.error = QStringLiteral("the evidence is not valid JSON: %1 at character %2")
                      .arg(error.errorString())
                      .arg(error.offset);
      return out;
    }
    if (!doc.isObject()) {
      out.error =
          QStringLiteral("the evidence must be a JSON object, e.g. {\"statement_line\": 42}");
      return out;
    }
    object = doc.object();
  }
  if (!reference.isEmpty()) {
    const QJsonValue existing = object.value(QStringLiteral("gateway_ref"));
    if (!existing.isUndefined() && existing.toString() != reference) {
      out.error =
          QStringLiteral("the gateway reference differs from the JSON's \"gateway_ref\"; keep one");
      return out;
    }
    object.insert(QStringLiteral("gateway_ref"), reference);
  }
  if (object.isEmpty() && text.isEmpty()) return out;
  out.json = QJsonDocument(object).toJson(QJsonDocument::Compact).toStdString();
  return out;
}

EvidenceInput evidenceOfCharge(const FundFlow& charge) {
  QJsonObject object;
  object.insert(QStringLiteral("fund_flow_id"), static_cast<qint64>(charge.id));
  object.insert(QStringLiteral("flow_kind"),
                QString::fromStdString(std::string(format(charge.kind))));
  object.insert(QStringLiteral("amount_minor"), static_cast<qint64>(charge.amountMinor));
  object.insert(QStringLiteral("currency"), QString::fromStdString(charge.currency));
  return {QString::fromStdString(charge.externalRef),
          QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact))};
}

}  // namespace idem::admin

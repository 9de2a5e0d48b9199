#include "models/json_text.hpp"

#include <QJsonDocument>

namespace idem::admin {
namespace {

std::optional<QJsonDocument> parse(const std::string& text) {
  QJsonParseError error{};
  QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(text), &error);
  if (error.error != QJsonParseError::NoError) return std::nullopt;
  return doc;
}

}  // namespace

QString prettyJson(const std::optional<std::string>& json) {
  if (!json) return QStringLiteral("(none)");
  if (auto doc = parse(*json))
    return QString::fromUtf8(doc->toJson(QJsonDocument::Indented)).trimmed();
  // Scalars (a bare string or number) are valid jsonb but not a QJsonDocument: show them as stored.
  return QString::fromStdString(*json);
}

QString compactJson(const std::optional<std::string>& json, int maxChars) {
  if (!json) return {};
  QString text = QString::fromStdString(*json);
  if (auto doc = parse(*json)) text = QString::fromUtf8(doc->toJson(QJsonDocument::Compact));
  if (text.size() > maxChars) text = text.left(maxChars - 1) + QChar(0x2026);
  return text;
}

}  // namespace idem::admin

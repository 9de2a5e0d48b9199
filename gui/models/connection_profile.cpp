#include "models/connection_profile.hpp"

#include <QRegularExpression>
#include <QUrl>

namespace idem::admin {
namespace {

const QString kGroup = QStringLiteral("connection");

void appendParameter(std::string& dsn, const char* key, const QString& value) {
  if (value.isEmpty()) return;
  if (!dsn.empty()) dsn += ' ';
  dsn += key;
  dsn += '=';
  dsn += quoteDsnValue(value);
}

bool isUri(const QString& dsn) {
  return dsn.startsWith(QStringLiteral("postgresql://")) ||
         dsn.startsWith(QStringLiteral("postgres://"));
}

}  // namespace

ConnectionProfile ConnectionProfile::load(QSettings& settings) {
  ConnectionProfile p;
  settings.beginGroup(kGroup);
  p.useDsn = settings.value(QStringLiteral("useDsn"), false).toBool();
  p.dsn = settings.value(QStringLiteral("dsn")).toString();
  p.host = settings.value(QStringLiteral("host")).toString();
  p.port = settings.value(QStringLiteral("port")).toString();
  p.dbname = settings.value(QStringLiteral("dbname")).toString();
  p.user = settings.value(QStringLiteral("user")).toString();
  settings.endGroup();
  return p;
}

void ConnectionProfile::save(QSettings& settings) const {
  settings.beginGroup(kGroup);
  settings.setValue(QStringLiteral("useDsn"), useDsn);
  settings.setValue(QStringLiteral("dsn"), withoutPassword(dsn));
  settings.setValue(QStringLiteral("host"), host);
  settings.setValue(QStringLiteral("port"), port);
  settings.setValue(QStringLiteral("dbname"), dbname);
  settings.setValue(QStringLiteral("user"), user);
  settings.remove(QStringLiteral("password"));  // in case an older build ever wrote one
  settings.endGroup();
}

std::string ConnectionProfile::toDsn(const QString& password) const {
  std::string out;
  if (useDsn) {
    out = dsn.trimmed().toStdString();
    if (password.isEmpty()) return out;
    if (isUri(dsn.trimmed())) {
      out += dsn.contains(QLatin1Char('?')) ? '&' : '?';
      out += "password=" + QUrl::toPercentEncoding(password).toStdString();
    } else {
      appendParameter(out, "password", password);
    }
    return out;
  }
  appendParameter(out, "host", host.trimmed());
  appendParameter(out, "port", port.trimmed());
  appendParameter(out, "dbname", dbname.trimmed());
  appendParameter(out, "user", user.trimmed());
  appendParameter(out, "password", password);
  return out;
}

bool ConnectionProfile::isEmpty() const {
  return useDsn ? dsn.trimmed().isEmpty()
                : host.isEmpty() && port.isEmpty() && dbname.isEmpty() && user.isEmpty();
}

QString withoutPassword(const QString& dsn) {
  static const QRegularExpression keyValue(
      QStringLiteral(R"((^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+))"),
      QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression uriUserInfo(QStringLiteral(R"((://[^:/@]*):[^@/]*@)"));
  static const QRegularExpression uriQuery(QStringLiteral(R"(([?&])password=[^&]*&?)"),
                                           QRegularExpression::CaseInsensitiveOption);
  QString out = dsn;
  if (isUri(out.trimmed())) {
    out.replace(uriUserInfo, QStringLiteral("\\1@"));
    out.replace(uriQuery, QStringLiteral("\\1"));
    while (out.endsWith(QLatin1Char('&')) || out.endsWith(QLatin1Char('?'))) out.chop(1);
    return out;
  }
  out.replace(keyValue, QString());
  return out.simplified();
}

std::string quoteDsnValue(const QString& value) {
  std::string out = "'";
  for (const char c : value.toStdString()) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
  return out;
}

}  // namespace idem::admin

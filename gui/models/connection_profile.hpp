// Where the admin app connects, as remembered between runs (QSettings). Never a password: that is
// libpq's business (~/.pgpass, PGPASSWORD) or typed into the dialog and kept in memory only.
#pragma once

#include <QSettings>
#include <QString>
#include <string>

namespace idem::admin {

struct ConnectionProfile {
  bool useDsn = false;  // a DSN typed as one string, else the fields below
  QString dsn;
  QString host;
  QString port;
  QString dbname;
  QString user;

  static ConnectionProfile load(QSettings& settings);
  // Stores the profile with any password removed from the DSN.
  void save(QSettings& settings) const;

  // A libpq DSN; empty fields are left to libpq's environment (PGHOST, PGUSER...). The password,
  // when given, is added here, in memory.
  std::string toDsn(const QString& password = {}) const;
  bool isEmpty() const;
};

// The DSN with its password removed (key=value or URI form), for storing.
QString withoutPassword(const QString& dsn);

// One value of a key=value DSN, quoted as libpq expects ('...' with \' and \\ escaped).
std::string quoteDsnValue(const QString& value);

}  // namespace idem::admin

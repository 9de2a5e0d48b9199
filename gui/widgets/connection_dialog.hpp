// Where to connect: a DSN, or host/port/database/user. Remembered between runs without the
// password; an empty password leaves authentication to libpq (~/.pgpass, PGPASSWORD, peer auth).
#pragma once

#include <QDialog>
#include <optional>

#include "idem/connection_settings.hpp"
#include "models/connection_profile.hpp"

class QLabel;
class QLineEdit;
class QRadioButton;
class QStackedWidget;

namespace idem::admin {

class ConnectionDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ConnectionDialog(const ConnectionProfile& profile, QWidget* parent = nullptr);

  // Shows the dialog filled from QSettings; on Connect, remembers the profile (never the password)
  // and returns the settings to connect with. Empty when cancelled.
  static std::optional<idem::ConnectionSettings> ask(QWidget* parent, const QString& problem = {});

  ConnectionProfile profile() const;
  // Typed into the dialog, kept in memory only.
  QString password() const;
  // A problem from the last attempt ("password authentication failed ..."), shown at the top.
  void setProblem(const QString& problem);
  void focusPassword();

 private:
  void setUpFields();
  void addPages();

  QRadioButton* useFields_;
  QRadioButton* useDsn_;
  QStackedWidget* stack_;
  QLineEdit* dsn_;
  QLineEdit* host_;
  QLineEdit* port_;
  QLineEdit* dbname_;
  QLineEdit* user_;
  QLineEdit* password_;
  QLabel* problem_;
};

}  // namespace idem::admin

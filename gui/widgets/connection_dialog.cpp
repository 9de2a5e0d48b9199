#include "widgets/connection_dialog.hpp"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "models/status_palette.hpp"

namespace idem::admin {

ConnectionDialog::ConnectionDialog(const ConnectionProfile& profile, QWidget* parent)
    : QDialog(parent),
      useFields_(new QRadioButton(QStringLiteral("Server and database"), this)),
      useDsn_(new QRadioButton(QStringLiteral("Connection string (DSN)"), this)),
      stack_(new QStackedWidget(this)),
      dsn_(new QLineEdit(profile.dsn, this)),
      host_(new QLineEdit(profile.host, this)),
      port_(new QLineEdit(profile.port, this)),
      dbname_(new QLineEdit(profile.dbname, this)),
      user_(new QLineEdit(profile.user, this)),
      password_(new QLineEdit(this)),
      problem_(new QLabel(this)) {
  setObjectName(QStringLiteral("connectionDialog"));
  setWindowTitle(QStringLiteral("Connect to the idem database"));
  setMinimumWidth(520);

  setUpFields();

  auto* choice = new QHBoxLayout;
  choice->addWidget(useFields_);
  choice->addWidget(useDsn_);
  choice->addStretch(1);

  addPages();

  auto* secret = new QFormLayout;
  password_->setEchoMode(QLineEdit::Password);
  password_->setObjectName(QStringLiteral("connectionPassword"));
  password_->setPlaceholderText(QStringLiteral("leave empty to use ~/.pgpass or PGPASSWORD"));
  secret->addRow(QStringLiteral("Password:"), password_);
  auto* note =
      new QLabel(QStringLiteral("The password is kept in memory for this session and never saved. "
                                "Empty fields fall back to libpq's environment."),
                 this);
  note->setWordWrap(true);
  note->setStyleSheet(QStringLiteral("color: palette(mid);"));

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons->button(QDialogButtonBox::Ok)->setText(QStringLiteral("Connect"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(problem_);
  layout->addLayout(choice);
  layout->addWidget(stack_);
  layout->addLayout(secret);
  layout->addWidget(note);
  layout->addWidget(buttons);

  connect(useDsn_, &QRadioButton::toggled, this,
          [this](bool dsn) { stack_->setCurrentIndex(dsn ? 1 : 0); });
  (profile.useDsn ? useDsn_ : useFields_)->setChecked(true);
  stack_->setCurrentIndex(profile.useDsn ? 1 : 0);
}

void ConnectionDialog::setUpFields() {
  useFields_->setObjectName(QStringLiteral("connectionUseFields"));
  useDsn_->setObjectName(QStringLiteral("connectionUseDsn"));
  dsn_->setObjectName(QStringLiteral("connectionDsn"));
  host_->setObjectName(QStringLiteral("connectionHost"));
  port_->setObjectName(QStringLiteral("connectionPort"));
  dbname_->setObjectName(QStringLiteral("connectionDatabase"));
  user_->setObjectName(QStringLiteral("connectionUser"));
  problem_->setObjectName(QStringLiteral("connectionProblem"));
  problem_->setWordWrap(true);
  problem_->setStyleSheet(QStringLiteral("color: %1;").arg(toneCss(Tone::ErrorText)));
  problem_->setVisible(false);
}

// The two ways to name the server: host, port, database and user, or one connection string.
void ConnectionDialog::addPages() {
  auto* fieldsPage = new QWidget(this);
  auto* fields = new QFormLayout(fieldsPage);
  host_->setPlaceholderText(QStringLiteral("PGHOST, or the local socket"));
  port_->setPlaceholderText(QStringLiteral("PGPORT, or 5432"));
  dbname_->setPlaceholderText(QStringLiteral("PGDATABASE, or the user name"));
  user_->setPlaceholderText(QStringLiteral("PGUSER, or your login name"));
  fields->addRow(QStringLiteral("Host:"), host_);
  fields->addRow(QStringLiteral("Port:"), port_);
  fields->addRow(QStringLiteral("Database:"), dbname_);
  fields->addRow(QStringLiteral("User:"), user_);

  auto* dsnPage = new QWidget(this);
  auto* dsnForm = new QFormLayout(dsnPage);
  dsn_->setPlaceholderText(
      QStringLiteral("host=db.internal dbname=idem user=alice  or  postgresql://alice@db/idem"));
  dsnForm->addRow(QStringLiteral("DSN:"), dsn_);
  stack_->addWidget(fieldsPage);
  stack_->addWidget(dsnPage);
}

ConnectionProfile ConnectionDialog::profile() const {
  ConnectionProfile p;
  p.useDsn = useDsn_->isChecked();
  p.dsn = dsn_->text().trimmed();
  p.host = host_->text().trimmed();
  p.port = port_->text().trimmed();
  p.dbname = dbname_->text().trimmed();
  p.user = user_->text().trimmed();
  return p;
}

QString ConnectionDialog::password() const {
  return password_->text();
}

void ConnectionDialog::setProblem(const QString& problem) {
  problem_->setText(problem);
  problem_->setVisible(!problem.isEmpty());
}

void ConnectionDialog::focusPassword() {
  password_->setFocus();
}

std::optional<idem::ConnectionSettings> ConnectionDialog::ask(QWidget* parent,
                                                              const QString& problem) {
  QSettings settings;
  ConnectionDialog dialog(ConnectionProfile::load(settings), parent);
  dialog.setProblem(problem);
  if (problem.contains(QStringLiteral("password"))) dialog.focusPassword();
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  const ConnectionProfile profile = dialog.profile();
  profile.save(settings);
  idem::ConnectionSettings out;
  out.dsn = profile.toDsn(dialog.password());
  out.source = "the connection dialog";
  return out;
}

}  // namespace idem::admin

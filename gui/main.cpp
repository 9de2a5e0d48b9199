// idemwatch-admin: the operators' console for stuck idempotency records. Everything lives in the
// idem_admin_widgets and idem_admin_models libraries; this file reads the command line and picks
// the database: --db.dsn, else IDEMWATCH_DSN, else the connection dialog (remembered, minus the
// password).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdlib>
#include <iostream>

#include "idem/build_info.hpp"
#include "idem/connection_settings.hpp"
#include "widgets/connection_dialog.hpp"
#include "widgets/main_window.hpp"

int main(int argc, char* argv[]) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("idemwatch"));
  QApplication::setApplicationName(QStringLiteral("idemwatch-admin"));
  QApplication::setApplicationVersion(
      QStringLiteral(IDEMWATCH_VERSION " (%1)").arg(QString::fromUtf8(idem::buildRevision())));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral(
      "Find, understand and settle stuck idempotency records.\n"
      "The database: --db.dsn, else IDEMWATCH_DSN, else the connection dialog; libpq's PG* "
      "variables and ~/.pgpass apply in every case."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption dsn(QStringLiteral("db.dsn"),
                               QStringLiteral("libpq connection string or postgresql:// URI."),
                               QStringLiteral("dsn"));
  const QCommandLineOption refresh(QStringLiteral("refresh"),
                                   QStringLiteral("Auto-refresh interval in seconds (default 5)."),
                                   QStringLiteral("seconds"), QStringLiteral("5"));
  const QCommandLineOption pageSize(
      QStringLiteral("page-size"),
      QStringLiteral("Rows per page fetched as you scroll (default 200)."), QStringLiteral("rows"),
      QStringLiteral("200"));
  const QCommandLineOption paused(QStringLiteral("paused"),
                                  QStringLiteral("Start with auto-refresh paused."));
  parser.addOptions({dsn, refresh, pageSize, paused});
  parser.process(app);

  idem::admin::MainWindow::Options options;
  bool ok = false;
  const int seconds = parser.value(refresh).toInt(&ok);
  if (!ok || seconds < 1 || seconds > 3600) {
    std::cerr << "idemwatch-admin: --refresh takes 1 to 3600 seconds\n";
    return 2;
  }
  options.refreshInterval = std::chrono::seconds(seconds);
  options.pageSize = parser.value(pageSize).toInt(&ok);
  if (!ok || options.pageSize < 10 || options.pageSize > 5000) {
    std::cerr << "idemwatch-admin: --page-size takes 10 to 5000 rows\n";
    return 2;
  }

  idem::admin::MainWindow window(options);
  if (parser.isSet(paused)) window.setPaused(true);
  QObject::connect(&window, &idem::admin::MainWindow::passwordNeeded, &window,
                   [&window](const QString& problem) {
                     if (auto settings = idem::admin::ConnectionDialog::ask(&window, problem))
                       window.connectTo(*settings);
                   });

  std::optional<std::string> flag;
  if (parser.isSet(dsn)) flag = parser.value(dsn).toStdString();
  const char* env = std::getenv("IDEMWATCH_DSN");
  if (flag || (env != nullptr && *env != '\0')) {
    window.connectTo(idem::ConnectionSettings::resolve(flag));
  } else if (auto settings = idem::admin::ConnectionDialog::ask(nullptr)) {
    window.connectTo(*settings);
  } else {
    return 0;
  }
  window.show();
  return QApplication::exec();
}

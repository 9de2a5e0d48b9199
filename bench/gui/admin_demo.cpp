// A demo database for the admin app, and the screenshot in docs/screenshots/.
//
//   idemwatch-admin-demo --db.dsn "host=... user=postgres" --seed
//       (re)creates database idemwatch_demo, migrates it and seeds it through the protocol
//       functions
//   idemwatch-admin-demo --db.dsn "..." --screenshot docs/screenshots/admin-main.png
//       opens the main window as the operator alice, selects the stuck showcase record and saves
//       the window as PNG (run it under xvfb-run for the real X11 rendering); with
//       --settle-screenshot FILE also the settle dialog on a double DEBIT, FAILED chosen without
//       the override: the server's money_moved refusal, the flows that count, the override box;
//       with --correct-screenshot FILE the dialog correcting a FAILED payment to SUCCESS
#include <QApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QLineEdit>
#include <QPixmap>
#include <QPlainTextEdit>
#include <QTabWidget>
#include <QTimer>
#include <functional>
#include <iostream>
#include <pqxx/pqxx>

#include "demo_records.hpp"
#include "idem/command_line.hpp"
#include "idem/connection_settings.hpp"
#include "idem/migrations.hpp"
#include "models/database_session.hpp"
#include "models/record_table_model.hpp"
#include "models/selected_record.hpp"
#include "widgets/main_window.hpp"
#include "widgets/record_detail_view.hpp"
#include "widgets/record_filter_bar.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/settle_dialog.hpp"

using namespace idem;

namespace {

// Runs the event loop until ready() or the deadline.
bool waitFor(const std::function<bool()>& ready, int timeoutMs) {
  const QDeadlineTimer deadline(timeoutMs);
  while (!ready()) {
    if (deadline.hasExpired()) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  }
  return true;
}

int seed(const std::string& serverDsn, const std::string& database) {
  {
    pqxx::connection server(serverDsn);
    pqxx::nontransaction tx(server);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(database) + " WITH (FORCE)");
    tx.exec("CREATE DATABASE " + tx.quote_name(database));
  }
  const std::string dsn = serverDsn + " dbname=" + database;
  pqxx::connection owner(dsn);
  migrate(owner, bundledMigrations());
  const bench::DemoResult result = bench::seedDemo(owner, dsn);
  pqxx::nontransaction tx(owner);
  tx.exec("CREATE SCHEMA idem_demo");
  tx.exec_params("CREATE TABLE idem_demo.showcase AS SELECT $1::text AS key", result.showcase);
  std::cout << "seeded " << result.records << " records into " << database
            << "; showcase: " << result.showcase << "\nopen it with:\n  idemwatch-admin --db.dsn \""
            << dsn << " user=alice\"\n";
  return 0;
}

// Selects `key` once `listed` says its row is there, and opens the settle dialog on it; null when
// it cannot.
admin::SettleDialog* openSettleDialog(admin::MainWindow& window, const std::string& key,
                                      const std::function<bool()>& listed) {
  if (!waitFor(listed, 10000) || !window.selectRecord(QString::fromStdString(key)) ||
      !waitFor([&] { return window.settleAction()->isEnabled(); }, 10000)) {
    std::cerr << "cannot select " << key << "\n";
    return nullptr;
  }
  return window.openSettleDialog();
}

// Once the dialog has painted: writes its picture to `file`, closes it without sending.
int saveAndClose(admin::SettleDialog* dialog, const QString& file) {
  waitFor([] { return false; }, 300);
  if (!dialog->grab().save(file)) return 1;
  std::cout << "wrote " << file.toStdString() << " (" << dialog->width() << "x" << dialog->height()
            << ")\n";
  dialog->reject();
  return 0;
}

// The settle dialog on an UNKNOWN payment with two DEBITs, FAILED chosen and sent without the
// override: the server refuses (money_moved), the dialog shows its words and offers the override.
int settleScreenshot(admin::MainWindow& window, const std::string& key, const QString& file) {
  window.showAttention();
  admin::SettleDialog* dialog =
      openSettleDialog(window, key, [&] { return window.attentionModel()->rowOfKey(key) >= 0; });
  if (dialog == nullptr) return 1;
  dialog->chooseTarget(RecordStatus::Failed);
  dialog->findChild<QPlainTextEdit*>(QStringLiteral("settleReason"))
      ->setPlainText(QStringLiteral("customer reports the payment failed"));
  if (!waitFor([&] { return dialog->overrideOffered(); }, 10000)) return 1;
  dialog->submit();  // refused by the server: the override is not ticked
  if (!waitFor([&] { return dialog->outcome().has_value(); }, 10000)) return 1;
  return saveAndClose(dialog, file);
}

// The dialog on a FAILED payment: only the correction to SUCCESS is offered. Nothing is sent.
int correctScreenshot(admin::MainWindow& window, const std::string& key, const QString& file) {
  window.showRecords();
  window.filterBar()->keyEdit()->setText(QString::fromStdString(key));
  window.filterBar()->applyNow();
  admin::SettleDialog* dialog =
      openSettleDialog(window, key, [&] { return window.recordsModel()->rowOfKey(key) >= 0; });
  if (dialog == nullptr || !dialog->isCorrection()) return 1;
  dialog->findChild<QPlainTextEdit*>(QStringLiteral("settleReason"))
      ->setPlainText(QStringLiteral("gateway statement line 2213: captured after the decline"));
  dialog->findChild<QLineEdit*>(QStringLiteral("settleGatewayRef"))
      ->setText(QStringLiteral("gw-2213-late"));
  if (!waitFor([&] { return !dialog->warnings().isEmpty(); }, 10000)) return 1;
  return saveAndClose(dialog, file);
}

int screenshot(const std::string& serverDsn, const std::string& database, const QString& file,
               const QString& settleFile, const QString& correctFile) {
  const std::string dsn = serverDsn + " dbname=" + database;
  std::string showcase;
  {
    pqxx::connection owner(dsn);
    showcase = pqxx::nontransaction(owner).exec("SELECT key FROM idem_demo.showcase")[0][0].c_str();
  }
  admin::MainWindow::Options options;
  admin::MainWindow window(options);
  window.resize(1600, 1000);
  window.connectTo(ConnectionSettings::resolve(dsn + " user=alice"));
  window.show();
  auto ready = [&] {
    return window.session()->isConnected() && window.recordsModel()->rowCount() > 0 &&
           !window.recordsModel()->isLoading() && window.attentionModel()->rowCount() > 0 &&
           window.countsText().contains(QStringLiteral("unknown"));
  };
  if (!waitFor(ready, 20000)) {
    std::cerr << "the window did not load: " << window.connectionStatusText().toStdString() << "\n";
    return 1;
  }
  // Load until the showcase is in the table, then select it where it is, among its neighbours.
  while (window.recordsModel()->rowOfKey(showcase) < 0 && window.recordsModel()->hasMore()) {
    window.recordsModel()->fetchMore({});
    waitFor([&] { return !window.recordsModel()->isLoading(); }, 10000);
  }
  window.showRecords();
  if (!window.selectRecord(QString::fromStdString(showcase))) {
    std::cerr << "showcase " << showcase << " not found\n";
    return 1;
  }
  window.recordsView()->scrollToTop();
  if (!waitFor([&] { return window.selectedRecord()->record().has_value(); }, 10000)) return 1;
  window.detailView()->tabs()->setCurrentIndex(0);
  waitFor([] { return false; }, 300);  // let the last repaint happen
  QDir().mkpath(QFileInfo(file).absolutePath());
  if (!window.grab().save(file)) {
    std::cerr << "cannot write " << file.toStdString() << "\n";
    return 1;
  }
  std::cout << "wrote " << file.toStdString() << " (" << window.width() << "x" << window.height()
            << ")\n";
  if (settleFile.isEmpty()) return 0;
  std::string doubleDebit;
  {
    pqxx::connection owner(dsn);
    const auto r = pqxx::nontransaction(owner).exec(
        "SELECT r.idempotency_key FROM idem.records r JOIN idem.fund_flows f USING (biz_type, "
        "biz_id) "
        "WHERE r.status = 'UNKNOWN' AND f.duplicate_of IS NOT NULL LIMIT 1");
    if (r.empty()) return 1;
    doubleDebit = r[0][0].c_str();
  }
  if (settleScreenshot(window, doubleDebit, settleFile) != 0) return 1;
  if (correctFile.isEmpty()) return 0;
  std::string failed;
  {
    pqxx::connection owner(dsn);
    const auto r = pqxx::nontransaction(owner).exec(
        "SELECT idempotency_key FROM idem.records WHERE status = 'FAILED' AND biz_type = 'payment' "
        "AND NOT retry_allowed ORDER BY updated_at DESC LIMIT 1");
    if (r.empty()) return 1;
    failed = r[0][0].c_str();
  }
  return correctScreenshot(window, failed, correctFile);
}

}  // namespace

int main(int argc, char* argv[]) {
  return guardedMain("idemwatch-admin-demo", [&] {
    std::optional<std::string> serverDsn, file;
    std::string database = "idemwatch_demo", settleFile, correctFile;
    bool seedFirst = false;
    CommandLine cli("idemwatch-admin-demo",
                    "idemwatch-admin-demo --db.dsn DSN [--seed] [--screenshot FILE]");
    cli.text("db.dsn", "DSN", "a superuser DSN of the cluster (its maintenance database; required)",
             serverDsn);
    cli.text("database", "NAME", "demo database", database);
    cli.flag("seed", "drop, create, migrate and seed the demo database", seedFirst);
    cli.text("screenshot", "FILE", "save the main window, a stuck record selected, as PNG", file);
    cli.text("settle-screenshot", "FILE",
             "with --screenshot: also the settle dialog refusing FAILED while money moved",
             settleFile);
    cli.text("correct-screenshot", "FILE",
             "with --settle-screenshot: also the dialog correcting a FAILED payment to SUCCESS",
             correctFile);
    if (!cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout)) return 0;
    if (!serverDsn) throw UsageError("--db.dsn is required");
    if (seedFirst && seed(*serverDsn, database) != 0) return 1;
    if (file) {
      QApplication app(argc, argv);
      return screenshot(*serverDsn, database, QString::fromStdString(*file),
                        QString::fromStdString(settleFile), QString::fromStdString(correctFile));
    }
    return 0;
  });
}

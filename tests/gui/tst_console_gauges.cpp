// From the alert to the screen: on the same data, the exporter's money gauges (an in-process
// exporter, scraped over HTTP) count exactly the rows the console's Reconciliation and
// Overcharges tabs show, and both fall together once the REFUND is recorded.
#include <QtTest>

#include "admin_fixture.hpp"
#include "exporter_harness.hpp"
#include "metric_keys.hpp"
#include "models/database_session.hpp"
#include "models/overcharge_model.hpp"
#include "models/reconciliation_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/overcharges_view.hpp"
#include "widgets/reconciliation_view.hpp"
#include "widgets/refresh_stamp.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

const std::string kOvercharged = test::overchargedObjectsKey("payment");
const std::string kOwedCny = test::overchargedAmountKey("payment", "CNY");

double owed(const OverchargeModel& m) {
  double sum = 0;
  for (const Overcharge& o : m.rows()) sum += static_cast<double>(o.owedMinor);
  return sum;
}

}  // namespace

class TestConsoleGauges : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;

 private slots:
  void initTestCase() { db_ = std::make_unique<test::TestDatabase>("tst_console_gauges"); }

  void gaugesCountTheTabsRows() {
    test::AdminScenario s;
    {
      auto c = db_->connect();
      s = test::seedScenario(*c);
      ProtocolClient client(*c);
      const Claim paid = test::claim(client, test::paymentRequest("pay-nomoney", "ord-nm"));
      QVERIFY(client.complete("pay-nomoney", paid.version, "{}", paid.token).ok());
    }
    const std::string alice = db_->createLoginRole("alice", "idem_operator");
    MainWindow::Options o;
    o.refreshInterval = std::chrono::hours(1);
    MainWindow w(o);
    w.view<ReconciliationView>()->setSpan({std::chrono::hours(24), std::chrono::seconds(0)});
    w.connectTo(test::settingsFor(db_->dsnAs(alice)));
    ReconciliationView* rec = w.view<ReconciliationView>();
    OverchargesView* over = w.view<OverchargesView>();
    const auto loaded = [&] {
      return QTest::qWaitFor(
          [&] {
            return rec->stamp()->last().isValid() && !rec->isLoading() &&
                   over->stamp()->last().isValid() && !over->isLoading();
          },
          15000);
    };
    QVERIFY(loaded());

    auto options = test::testOptions(db_->dsn());
    options.reconcileGrace = std::chrono::milliseconds(0);
    test::RunningExporter exporter(options);
    QVERIFY(exporter.waitForCollections(2));
    test::Series series = exporter.scrape();
    QCOMPARE(test::value(series, test::kDebitWithoutSuccessKey),
             std::optional(double(rec->model()->count(MoneyQuestion::MovedWithoutSuccess))));
    QCOMPARE(test::value(series, test::kSuccessWithoutDebitKey),
             std::optional(double(rec->model()->count(MoneyQuestion::SuccessWithoutMoney))));
    QCOMPARE(test::value(series, kOvercharged), std::optional(double(over->model()->rowCount())));
    QCOMPARE(test::value(series, kOwedCny), std::optional(owed(*over->model())));
    QCOMPARE(over->model()->rowCount(),
             1);  // the data is not empty: the comparison means something
    QVERIFY(rec->model()->count(MoneyQuestion::MovedWithoutSuccess) >= 2);

    {
      auto c = db_->connect();
      ProtocolClient(*c).recordFundFlow({"payment", "ord-double", FundFlowKind::Refund, 2990, "CNY",
                                         "gw-refund-1", s.unknownDoubleDebit});
    }
    w.refreshNow();
    QVERIFY(QTest::qWaitFor([&] { return over->model()->rowCount() == 0; }, 15000));
    QVERIFY(exporter.waitForCollections(2));
    series = exporter.scrape();
    QCOMPARE(test::value(series, kOvercharged).value_or(0), 0.0);
    QCOMPARE(test::value(series, kOwedCny).value_or(0), 0.0);
  }
};

QTEST_MAIN(TestConsoleGauges)
#include "tst_console_gauges.moc"

// The admin window is composed from its registered views: its tabs are exactly the registrations,
// in their order, titled with their names; a view registered here, in one file the window has
// never heard of, becomes a tab at the position it asked for, with its View menu entry; a second
// view with a name already taken is refused, naming it. No database: the window is never
// connected.
#include <QAction>
#include <QBuffer>
#include <QLabel>
#include <QTabWidget>
#include <QtTest>
#include <stdexcept>

#include "widgets/main_window.hpp"
#include "widgets/record_detail_view.hpp"
#include "widgets/view_registry.hpp"

using namespace idem::admin;

namespace {

// A tiny view, registered the way a real one is: between Needs attention (20) and
// Reconciliation (30), with a View menu entry and no export.
[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Probe"),
    .order = 25,
    .menuText = QStringLiteral("&Probe"),
    .shortcut = QKeySequence(Qt::CTRL | Qt::Key_9),
    .tip = QStringLiteral("The test's own view (Ctrl+9)"),
    .make =
        [](const ViewContext&, QWidget* parent) {
          auto* page = new QLabel(QStringLiteral("probe"), parent);
          page->setObjectName(QStringLiteral("probeView"));
          return View{.page = page};
        },
});

QStringList tabTitles(const MainWindow& w) {
  QStringList titles;
  for (int i = 0; i < w.tabs()->count(); ++i) titles << w.tabs()->tabText(i);
  return titles;
}

}  // namespace

class TestViewRegistry : public QObject {
  Q_OBJECT

 private slots:
  void tabsAreTheRegisteredViewsInOrder() {
    MainWindow w;
    QStringList registeredNames;
    for (const ViewRegistration* r : registeredViews()) registeredNames << r->name;
    QCOMPARE(tabTitles(w), registeredNames);
    // The console's own views, with the test's among them where it asked to be.
    QCOMPARE(registeredNames,
             QStringList({QStringLiteral("Records"), QStringLiteral("Needs attention"),
                          QStringLiteral("Probe"), QStringLiteral("Reconciliation"),
                          QStringLiteral("Overcharges"), QStringLiteral("Statements"),
                          QStringLiteral("Trace audit")}));
    QCOMPARE(w.tabs()->currentIndex(), 0);
  }

  void aViewRegisteredElsewhereIsATabAtItsPosition() {
    MainWindow w;
    auto* probe = w.findChild<QLabel*>(QStringLiteral("probeView"));
    QVERIFY(probe != nullptr);
    QCOMPARE(w.tabs()->indexOf(probe), 2);
    QCOMPARE(w.tabs()->tabText(2), QStringLiteral("Probe"));
    QCOMPARE(w.view<QLabel>(), probe);

    // Its View menu entry brings it up; the record detail is for record tables only, and a view
    // without an export disables the Export action while it is shown.
    w.show();
    QAction* show = nullptr;
    for (QAction* a : w.actions()) {
      if (a->text() == QStringLiteral("&Probe")) show = a;
    }
    QVERIFY(show != nullptr);
    QCOMPARE(show->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_9));
    show->trigger();
    QCOMPARE(w.tabs()->currentWidget(), probe);
    QVERIFY(!w.detailView()->isVisible());
    QVERIFY(!w.exportAction()->isEnabled());
    QBuffer out;
    QVERIFY(out.open(QIODevice::WriteOnly));
    QCOMPARE(w.exportCsv(out), -1);

    w.showRecords();
    QCOMPARE(w.tabs()->currentIndex(), 0);
    QVERIFY(w.detailView()->isVisible());
    QVERIFY(w.exportAction()->isEnabled());
  }

  void aCountJoinsTheRegisteredTitle() {
    MainWindow w;
    auto* probe = w.findChild<QLabel*>(QStringLiteral("probeView"));
    w.setTabCount(probe, 1234);
    QCOMPARE(w.tabs()->tabText(2), QStringLiteral("Probe (1,234)"));
    w.setTabCount(probe, 0);
    QCOMPARE(w.tabs()->tabText(2), QStringLiteral("Probe"));
  }

  void aSecondViewWithTheSameNameIsRefused() {
    const auto before = registeredViews().size();
    try {
      registerView(
          {.name = QStringLiteral("Records"), .make = [](const ViewContext&, QWidget* parent) {
             return View{.page = new QWidget(parent)};
           }});
      QFAIL("a second view named Records was registered");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("\"Records\" is already")),
               e.what());
    }
    QCOMPARE(registeredViews().size(), before);
    // Neither is a view without a name or without a factory.
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, registerView({.name = QString()}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             registerView({.name = QStringLiteral("No factory")}));
    QCOMPARE(registeredViews().size(), before);
  }
};

QTEST_MAIN(TestViewRegistry)
#include "tst_view_registry.moc"

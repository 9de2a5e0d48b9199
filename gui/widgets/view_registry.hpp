// The main window's tabs register themselves, as the exporter's collectors and idemctl's commands
// do: each view's .cpp ends with `[[maybe_unused]] const bool registered = registerView({...});` in
// its anonymous namespace, giving the tab's title, its position and a factory. MainWindow builds
// one tab per registration, in order, and keeps only what every view shares: the menus and
// actions, the status bar, the selected record and its detail, refresh, export. A new tab is one
// new .cpp and its test: the CMake glob picks the file up and the widgets library is linked whole,
// so no registration is dropped by the linker.
#pragma once

#include <QKeySequence>
#include <QString>
#include <functional>
#include <vector>

class QIODevice;
class QMenu;
class QWidget;

namespace idem::admin {

class DatabaseSession;
class MainWindow;
class RecordTableView;

// What a factory builds a view from.
struct ViewContext {
  MainWindow& window;  // the shared wiring: tab titles, the status bar, the timeline, refresh
  DatabaseSession* session;
  int pageSize;     // rows per page of a lazily loaded table (--page-size)
  QMenu& viewMenu;  // the View menu, for a view's own actions (after Refresh and Pause)
};

// A built view, as the window keeps it.
struct View {
  QWidget* page = nullptr;  // the tab's page
  // Re-reads what the view shows: with the others on F5, on reconnect and (automatic) on each
  // auto-refresh tick. Empty: nothing to re-read.
  std::function<void(bool automatic)> refresh{};
  // The Export action's CSV of the view (the number of rows written, -1 on a write error), and the
  // word in the file name it suggests. Empty: the action is disabled while the tab is shown.
  std::function<int(QIODevice& out)> exportCsv{};
  QString exportName{};
  // A table of records: its current row is the selected record (the detail under the tabs and
  // the Settle action), its selected rows are what bulk settle acts on, its loaded rows are
  // counted in the status bar. The detail is shown only under such a tab.
  RecordTableView* records = nullptr;
};

struct ViewRegistration {
  QString name{};   // the tab's title (a view may add a count: "Overcharges (3)"); unique
  int order = 100;  // the tab's position, lowest first (then by name)
  // An entry in the View menu that brings the tab up, with its shortcut and tip; empty: none.
  QString menuText{};
  QKeySequence shortcut{};
  QString tip{};
  // Builds the view under `parent` (the window); called once, by the window's constructor.
  std::function<View(const ViewContext& context, QWidget* parent)> make{};
};

// Called from each view's file at static initialisation. A second view with a name already
// registered, an empty name or no factory is refused with std::invalid_argument naming it: two
// tabs with one title could not be told apart, in the window or in the View menu.
bool registerView(ViewRegistration registration);

// Every registered view, in tab order.
std::vector<const ViewRegistration*> registeredViews();

}  // namespace idem::admin

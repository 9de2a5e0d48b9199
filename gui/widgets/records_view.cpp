#include "widgets/records_view.hpp"

#include <QAction>
#include <QMenu>
#include <QSet>
#include <QVBoxLayout>

#include "models/csv_writer.hpp"
#include "models/filter_summary.hpp"
#include "models/record_table_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/record_filter_bar.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {

RecordsView::RecordsView(DatabaseSession* session, int pageSize, QWidget* parent)
    : QWidget(parent),
      model_(new RecordTableModel(session, this)),
      filterBar_(new RecordFilterBar(this)),
      stamp_(new RefreshStamp(this)),
      table_(new RecordTableView(this)) {
  setObjectName(QStringLiteral("recordsPage"));
  model_->setObjectName(QStringLiteral("recordsModel"));
  model_->setPageSize(pageSize);
  stamp_->setObjectName(QStringLiteral("recordsRefreshStamp"));
  stamp_->setContentsMargins(8, 2, 8, 2);
  table_->setObjectName(QStringLiteral("recordsView"));
  table_->setRecordModel(model_);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(filterBar_);
  layout->addWidget(stamp_);
  layout->addWidget(table_);

  connect(model_, &RecordTableModel::fetched, stamp_, &RefreshStamp::stamp);
  connect(filterBar_, &RecordFilterBar::filterChanged, this, [this](const RecordFilter& f) {
    model_->setFilter(f);
    table_->showOrder(f.order);
  });
  connect(table_, &RecordTableView::orderRequested, filterBar_, &RecordFilterBar::setOrder);
  // The first page is asked for now; the worker answers once it is connected (or the answer
  // fails and the first connection re-asks).
  model_->setFilter(filterBar_->filter());
}

void RecordsView::refresh(bool automatic) {
  if (!automatic || model_->refreshKeepsPosition()) model_->refresh();
}

void RecordsView::learnBizTypes(const RecordPage& page) {
  QStringList bizTypes;
  QSet<QString> seen;
  for (const Record& r : page.records) {
    const QString t = QString::fromStdString(r.bizType);
    if (!seen.contains(t)) {
      seen.insert(t);
      bizTypes << t;
    }
  }
  filterBar_->addKnownBizTypes(bizTypes);
}

namespace {

// Find (Ctrl+F): the Records tab, its search field focused; in the View menu after Pause.
void addFindAction(const ViewContext& c, RecordsView* view) {
  auto* find = new QAction(QStringLiteral("&Find\u2026"), &c.window);
  find->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_F));
  find->setShortcutContext(Qt::WindowShortcut);
  find->setToolTip(QStringLiteral("Search by key or biz id (Ctrl+F)"));
  find->setStatusTip(find->toolTip());
  c.window.addAction(find);
  c.viewMenu.addAction(find);
  QObject::connect(find, &QAction::triggered, view, [window = &c.window, view] {
    window->showView(view);
    view->filterBar()->focusSearch();
  });
}

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Records"),
    .order = 10,
    .menuText = QStringLiteral("&Records"),
    .shortcut = QKeySequence(Qt::CTRL | Qt::Key_1),
    .tip = QStringLiteral("All records (Ctrl+1)"),
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new RecordsView(c.session, c.pageSize, parent);
          addFindAction(c, view);
          MainWindow* window = &c.window;
          QObject::connect(window, &MainWindow::recordPageRead, view, &RecordsView::learnBizTypes);
          // The window's title names what the records table is limited to.
          QObject::connect(
              view->filterBar(), &RecordFilterBar::filterChanged, window,
              [window](const RecordFilter& f) { window->setTitleDetail(filterSummary(f)); });
          return View{
              .page = view,
              .refresh = [view](bool automatic) { view->refresh(automatic); },
              .exportCsv =
                  [view](QIODevice& out) {
                    return writeCsv(*view->model(), out, RecordTableModel::ExportRole);
                  },
              .exportName = QStringLiteral("records"),
              .records = view->table(),
          };
        },
});

}  // namespace
}  // namespace idem::admin

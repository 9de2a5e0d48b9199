#include "widgets/attention_view.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

#include "models/csv_writer.hpp"
#include "models/record_table_model.hpp"
#include "widgets/main_window.hpp"
#include "widgets/record_table_view.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {

AttentionView::AttentionView(DatabaseSession* session, int pageSize, QWidget* parent)
    : QWidget(parent),
      model_(new RecordTableModel(session, this)),
      header_(new QLabel(this)),
      stamp_(new RefreshStamp(this)),
      table_(new RecordTableView(this)) {
  setObjectName(QStringLiteral("attentionPage"));
  model_->setObjectName(QStringLiteral("attentionModel"));
  model_->setPageSize(pageSize);
  header_->setObjectName(QStringLiteral("attentionHeader"));
  header_->setTextFormat(Qt::RichText);
  header_->setContentsMargins(8, 6, 8, 6);
  stamp_->setObjectName(QStringLiteral("attentionRefreshStamp"));
  stamp_->setContentsMargins(8, 0, 8, 2);
  // The order is the queue's own (longest waiting first): no sorting by header.
  table_->setObjectName(QStringLiteral("attentionView"));
  table_->setRecordModel(model_);
  table_->horizontalHeader()->setSortIndicatorShown(false);
  table_->horizontalHeader()->setSectionsClickable(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(header_);
  layout->addWidget(stamp_);
  layout->addWidget(table_);

  connect(model_, &RecordTableModel::fetched, stamp_, &RefreshStamp::stamp);
  // The first page is asked for now; the worker answers once it is connected.
  model_->setFilter(RecordFilter::attention());
}

void AttentionView::showCounts(const UnsettledCounts& counts) {
  const QLocale english(QLocale::English);
  header_->setText(
      QStringLiteral(
          "<b>Stuck records</b>, the one waiting longest first: PROCESSING past its lease "
          "(%1) and UNKNOWN (%2). Each needs a person to decide, with evidence, whether the "
          "side effect happened.")
          .arg(english.toString(counts.processingPastLease), english.toString(counts.unknown)));
}

namespace {

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Needs attention"),
    .order = 20,
    .menuText = QStringLiteral("Needs &attention"),
    .shortcut = QKeySequence(Qt::CTRL | Qt::Key_2),
    .tip = QStringLiteral("Stuck records, oldest first (Ctrl+2)"),
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new AttentionView(c.session, c.pageSize, parent);
          MainWindow* window = &c.window;
          QObject::connect(window, &MainWindow::countsChanged, view,
                           [window, view](const UnsettledCounts& counts) {
                             view->showCounts(counts);
                             window->setTabCount(view, counts.processingPastLease + counts.unknown);
                           });
          return View{
              .page = view,
              .refresh = [view](bool) { view->model()->refresh(); },
              .exportCsv =
                  [view](QIODevice& out) {
                    return writeCsv(*view->model(), out, RecordTableModel::ExportRole);
                  },
              .exportName = QStringLiteral("attention"),
              .records = view->table(),
          };
        },
});

}  // namespace
}  // namespace idem::admin

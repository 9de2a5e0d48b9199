#include "widgets/trace_audit_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTreeView>
#include <QVBoxLayout>
#include <set>

#include "models/csv_writer.hpp"
#include "models/database_session.hpp"
#include "models/status_palette.hpp"
#include "models/utf8_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/console_table.hpp"
#include "widgets/main_window.hpp"
#include "widgets/refresh_stamp.hpp"
#include "widgets/view_parts.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {

TraceAuditView::TraceAuditView(DatabaseSession* session, QWidget* parent)
    : QWidget(parent),
      session_(session),
      subject_(new QComboBox(this)),
      search_(new QLineEdit(this)),
      searchButton_(new QPushButton(QStringLiteral("Search"), this)),
      summary_(new QLabel(this)),
      stamp_(new RefreshStamp(this)) {
  setObjectName(QStringLiteral("traceAuditView"));
  subject_->setObjectName(QStringLiteral("traceSubject"));
  subject_->addItem(QStringLiteral("trace_id"), static_cast<int>(StorySubject::Trace));
  subject_->addItem(QStringLiteral("agent_id"), static_cast<int>(StorySubject::Agent));
  search_->setObjectName(QStringLiteral("traceSearch"));
  search_->setClearButtonEnabled(true);
  search_->setPlaceholderText(
      QStringLiteral("a trace id (or an agent id): its every attempt, transition and fund flow"));
  searchButton_->setObjectName(QStringLiteral("traceSearchButton"));
  summary_->setObjectName(QStringLiteral("traceSummary"));
  summary_->setTextFormat(Qt::RichText);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(8, 6, 8, 6);
  bar->addWidget(subject_);
  bar->addWidget(search_, 2);
  bar->addWidget(searchButton_);
  bar->addSpacing(12);
  bar->addWidget(summary_, 1);
  bar->addWidget(stamp_);

  table_ = makeConsoleTable(&model_, this, QStringLiteral("traceTable"), {TraceStoryModel::Key});
  fitColumns(table_,
             {QStringLiteral("2026-11-30 02:44:06"), QStringLiteral("transition"),
              QStringLiteral("issue_coupon:cpn-49183:73f301"), QStringLiteral("llm_retry"),
              QStringLiteral("payload_mismatch"), QStringLiteral("PROCESSING \u2192 UNKNOWN"),
              QStringLiteral("checkout_agent (system)"), QStringLiteral("DEBIT 29.90 CNY"),
              QStringLiteral("lease expired: the claimant did not answer")});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(table_, 1);

  connect(search_, &QLineEdit::returnPressed, this, &TraceAuditView::searchTyped);
  connect(searchButton_, &QPushButton::clicked, this, &TraceAuditView::searchTyped);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            const StoryEvent* e = model_.rowAt(current.row());
            if (e && e->hasBusinessObject()) {
              emit businessObjectSelected(fromUtf8(e->bizType), fromUtf8(e->bizId));
            }
          });
}

void TraceAuditView::searchTyped() {
  search(static_cast<StorySubject>(subject_->currentData().toInt()), search_->text());
}

void TraceAuditView::search(StorySubject subject, const QString& id) {
  subject_->setCurrentIndex(subject_->findData(static_cast<int>(subject)));
  if (search_->text() != id) search_->setText(id);
  const QString trimmed = id.trimmed();
  if (trimmed.isEmpty()) {
    requests_.cancel();
    query_.reset();
    model_.setEvents({});
    summary_->setText(QStringLiteral("Type a trace id or an agent id and press Enter"));
    return;
  }
  StoryQuery query{subject, trimmed.toStdString()};
  if (query_ != query) model_.setEvents({});  // another story: nothing of the last one stays
  query_ = query;
  refresh();
}

void TraceAuditView::refresh() {
  if (!query_ || !session_->isConnected()) return;
  session_->submit(
      requests_, "read the story",
      [q = *query_](pqxx::connection& c) { return readTraceStory(c, q); },
      [this](const std::vector<StoryEvent>& events) { onEvents(events); },
      [this](const RequestError& e) {
        lastError_ = QString::fromStdString(e.what());
        stamp_->markFailed(lastError_);
        summary_->setText(QStringLiteral("<span style=\"color:%1;\">%2</span>")
                              .arg(toneCss(Tone::ErrorText), lastError_.toHtmlEscaped()));
      });
}

void TraceAuditView::onEvents(const std::vector<StoryEvent>& events) {
  lastError_.clear();
  model_.setEvents(events);
  stamp_->stamp();
  int attempts = 0;
  int flows = 0;
  std::set<std::string> keys;
  for (const StoryEvent& e : events) {
    attempts += e.kind == StoryEventKind::Attempt ? 1 : 0;
    flows += e.kind == StoryEventKind::FundFlow ? 1 : 0;
    if (!e.key.empty()) keys.insert(e.key);
  }
  summary_->setText(
      events.empty()
          ? QStringLiteral("Nothing recorded for %1").arg(fromUtf8(query_->id).toHtmlEscaped())
          : QStringLiteral("<b>%1</b> attempts under <b>%2</b> keys, <b>%3</b> fund flows")
                .arg(attempts)
                .arg(keys.size())
                .arg(flows));
}

namespace {

[[maybe_unused]] const bool registered = registerView({
    .name = QStringLiteral("Trace audit"),
    .order = 50,
    .make =
        [](const ViewContext& c, QWidget* parent) {
          auto* view = new TraceAuditView(c.session, parent);
          // The selected event's business object: its story in the Timeline dock.
          QObject::connect(view, &TraceAuditView::businessObjectSelected, &c.window,
                           &MainWindow::showBusinessObjectStory);
          return tableView(view, QStringLiteral("trace-audit"));
        },
});

}  // namespace

}  // namespace idem::admin

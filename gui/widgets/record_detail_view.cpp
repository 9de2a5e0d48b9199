#include "widgets/record_detail_view.hpp"

#include <QAction>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QStackedWidget>
#include <QTabBar>
#include <QTabWidget>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

#include "models/age_text.hpp"
#include "models/json_text.hpp"
#include "models/selected_record.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"
#include "widgets/column_widths.hpp"
#include "widgets/evidence_table.hpp"

namespace idem::admin {
namespace {

QPlainTextEdit* makeJsonView(QWidget* parent, const QString& name) {
  auto* edit = new QPlainTextEdit(parent);
  edit->setObjectName(name);
  edit->setReadOnly(true);
  edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  edit->setLineWrapMode(QPlainTextEdit::NoWrap);
  return edit;
}

}  // namespace

RecordDetailView::RecordDetailView(SelectedRecord* selected, QAction* settleAction, QWidget* parent)
    : QWidget(parent),
      selected_(selected),
      stack_(new QStackedWidget(this)),
      placeholder_(new QLabel(this)),
      title_(new QLabel(this)),
      status_(new QLabel(this)),
      settleButton_(new QToolButton(this)),
      settleHint_(new QLabel(this)),
      tabs_(new QTabWidget(this)) {
  setObjectName(QStringLiteral("recordDetail"));
  placeholder_->setAlignment(Qt::AlignCenter);
  placeholder_->setWordWrap(true);
  placeholder_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  placeholder_->setText(
      QStringLiteral("Select a record to see its history, its attempts and the fund flows of its "
                     "business object."));

  auto* page = new QWidget(this);
  auto* outer = new QVBoxLayout(page);
  outer->setContentsMargins(6, 6, 6, 6);

  outer->addLayout(buildHeader(settleAction));

  auto* body = new QHBoxLayout;
  body->addWidget(buildFields(page), 0, Qt::AlignTop);

  buildEvidenceTabs();
  body->addWidget(tabs_, 1);
  outer->addLayout(body, 1);

  stack_->addWidget(placeholder_);
  stack_->addWidget(page);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(stack_);

  connect(selected_, &SelectedRecord::changed, this, &RecordDetailView::updateFromRecord);
  connect(selected_, &SelectedRecord::failed, this, &RecordDetailView::updateFromRecord);
  updateFromRecord();
}

// The record's key and status, the settle hint and the Settle button.
QHBoxLayout* RecordDetailView::buildHeader(QAction* settleAction) {
  auto* header = new QHBoxLayout;
  QFont titleFont = title_->font();
  titleFont.setPointSizeF(titleFont.pointSizeF() * 1.2);
  titleFont.setBold(true);
  title_->setFont(titleFont);
  title_->setObjectName(QStringLiteral("detailTitle"));
  title_->setTextFormat(Qt::PlainText);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setObjectName(QStringLiteral("detailStatus"));
  status_->setTextFormat(Qt::RichText);
  settleButton_->setDefaultAction(settleAction);
  settleButton_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  header->addWidget(title_);
  header->addSpacing(8);
  header->addWidget(status_);
  header->addStretch(1);
  settleHint_->setObjectName(QStringLiteral("detailSettleHint"));
  settleHint_->setWordWrap(true);
  settleHint_->setMaximumWidth(560);
  settleHint_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  settleHint_->setVisible(false);
  header->addWidget(settleHint_);
  header->addWidget(settleButton_);
  return header;
}

// The record's fields, beside the evidence tabs.
QWidget* RecordDetailView::buildFields(QWidget* page) {
  auto* fieldsBox = new QWidget(page);
  auto* form = new QFormLayout(fieldsBox);
  form->setContentsMargins(0, 0, 12, 0);
  form->setLabelAlignment(Qt::AlignRight);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  addField(form, QStringLiteral("business"), QStringLiteral("Business object"));
  addField(form, QStringLiteral("tool"), QStringLiteral("Tool"));
  addField(form, QStringLiteral("version"), QStringLiteral("Version"));
  addField(form, QStringLiteral("attempt_count"), QStringLiteral("Claims"));
  addField(form, QStringLiteral("created_at"), QStringLiteral("Created"));
  addField(form, QStringLiteral("updated_at"), QStringLiteral("Updated"));
  addField(form, QStringLiteral("lease_expires_at"), QStringLiteral("Lease expires"));
  addField(form, QStringLiteral("request_hash"), QStringLiteral("Request hash"));
  addField(form, QStringLiteral("last_error"), QStringLiteral("Last error"));
  addField(form, QStringLiteral("retry_allowed"), QStringLiteral("Retry"));
  fieldsBox->setMinimumWidth(340);
  fieldsBox->setMaximumWidth(460);
  return fieldsBox;
}

// The transitions, attempts, fund flows and payloads, one tab each.
void RecordDetailView::buildEvidenceTabs() {
  timeline_ = makeEvidenceTable(selected_->transitions(), tabs_, QStringLiteral("timelineView"),
                                RowSelection::Rows);
  attempts_ = makeEvidenceTable(selected_->attempts(), tabs_, QStringLiteral("attemptsView"),
                                RowSelection::Rows);
  fundFlows_ = makeEvidenceTable(selected_->fundFlows(), tabs_, QStringLiteral("fundFlowsView"),
                                 RowSelection::Rows);
  request_ = makeJsonView(tabs_, QStringLiteral("requestPayload"));
  response_ = makeJsonView(tabs_, QStringLiteral("responsePayload"));
  tabs_->setObjectName(QStringLiteral("detailTabs"));
  tabs_->addTab(timeline_, QStringLiteral("Timeline"));
  tabs_->addTab(attempts_, QStringLiteral("Attempts"));
  tabs_->addTab(fundFlows_, QStringLiteral("Fund flows"));
  tabs_->addTab(request_, QStringLiteral("Request"));
  tabs_->addTab(response_, QStringLiteral("Response"));

  const QString time = QStringLiteral("2026-11-30 02:44:06");
  fitColumns(timeline_,
             {time, QStringLiteral("PROCESSING"), QStringLiteral("PROCESSING"),
              QStringLiteral("99"), QStringLiteral("checkout_agent"), QStringLiteral("operator"),
              QStringLiteral("gateway console shows the capture; statement")});
  fitColumns(attempts_, {time, QStringLiteral("framework"), QStringLiteral("payload_mismatch"),
                         QStringLiteral("checkout-agent-4"), QStringLiteral("0123456789abcdef")});
  fitColumns(fundFlows_,
             {time, QStringLiteral("UNFREEZE"), QStringLiteral("99 999.99 CNY"),
              QStringLiteral("gw-0123456789ab"), QStringLiteral("issue_coupon:cpn-49183:73f301"),
              QStringLiteral("Duplicate of")});
}

QLabel* RecordDetailView::addField(QFormLayout* form, const QString& name, const QString& label) {
  auto* value = new QLabel(this);
  value->setObjectName(QStringLiteral("field_") + name);
  // What a writer stored (a biz_id, a tool, an error) is shown as text, never read as markup.
  value->setTextFormat(Qt::PlainText);
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setWordWrap(true);
  form->addRow(label + QLatin1Char(':'), value);
  fields_.append(value);
  return value;
}

QString RecordDetailView::fieldText(const QString& field) const {
  const auto* label = findChild<QLabel*>(QStringLiteral("field_") + field);
  return label ? label->text() : QString();
}

void RecordDetailView::setSettleHint(const QString& text, bool blocked) {
  settleHint_->setText(text);
  settleHint_->setStyleSheet(
      QStringLiteral("color: %1;").arg(toneCss(blocked ? Tone::Waiting : Tone::Settleable)));
  settleHint_->setVisible(!text.isEmpty());
}

QString RecordDetailView::settleHint() const {
  return settleHint_->isHidden() ? QString() : settleHint_->text();
}

void RecordDetailView::updateFromRecord() {
  if (selected_->key().empty()) {
    stack_->setCurrentWidget(placeholder_);
    return;
  }
  stack_->setCurrentIndex(1);
  title_->setText(fromUtf8(selected_->key()));
  const std::optional<Record>& r = selected_->record();
  auto field = [this](const QString& name) {
    return findChild<QLabel*>(QStringLiteral("field_") + name);
  };
  if (!r) {
    for (QLabel* l : std::as_const(fields_)) l->clear();
    request_->clear();
    response_->clear();
    if (!selected_->lastError().isEmpty()) {
      status_->setText(QStringLiteral("<span style=\"color:%1;\">%2</span>")
                           .arg(toneCss(Tone::Alarm), selected_->lastError().toHtmlEscaped()));
    } else {
      status_->setText(selected_->isMissing() ? QStringLiteral("<i>no such record (purged?)</i>")
                                              : QStringLiteral("<i>loading\u2026</i>"));
    }
    tabs_->setTabText(0, QStringLiteral("Timeline"));
    tabs_->setTabText(1, QStringLiteral("Attempts"));
    tabs_->setTabText(2, QStringLiteral("Fund flows"));
    return;
  }
  const Timestamp now = localNow();
  status_->setText(statusBadgeHtml(r->status) +
                   QStringLiteral("&nbsp; for %1").arg(ageText(now - r->updatedAt)));
  field(QStringLiteral("business"))
      ->setText(fromUtf8(r->bizType) + QStringLiteral(" / ") + fromUtf8(r->bizId));
  field(QStringLiteral("tool"))->setText(fromUtf8(r->tool));
  field(QStringLiteral("version"))->setText(QString::number(r->version));
  field(QStringLiteral("attempt_count"))->setText(QString::number(r->attemptCount));
  field(QStringLiteral("created_at"))->setText(displayTime(r->createdAt));
  field(QStringLiteral("created_at"))->setToolTip(isoTime(r->createdAt));
  field(QStringLiteral("updated_at"))->setText(displayTime(r->updatedAt));
  field(QStringLiteral("updated_at"))->setToolTip(isoTime(r->updatedAt));
  if (r->leaseExpiresAt) {
    const bool expired = *r->leaseExpiresAt < now;
    const QString when = displayTime(*r->leaseExpiresAt);
    field(QStringLiteral("lease_expires_at"))
        ->setText(
            expired && isUnsettled(r->status)
                ? QStringLiteral("%1 <span style=\"color:%3;\"><b>(expired %2 ago)</b></span>")
                      .arg(when, ageText(now - *r->leaseExpiresAt), toneCss(Tone::NeedsPerson))
                : when);
  } else {
    field(QStringLiteral("lease_expires_at"))->setText(QStringLiteral("\u2014"));
  }
  field(QStringLiteral("request_hash"))->setText(fromUtf8(r->requestHash).left(16) + QChar(0x2026));
  field(QStringLiteral("request_hash"))->setToolTip(fromUtf8(r->requestHash));
  field(QStringLiteral("last_error"))
      ->setText(r->lastError ? fromUtf8(*r->lastError).toHtmlEscaped() : QStringLiteral("\u2014"));
  // Only a FAILED record can be claimed again; whether it may be is retry_allowed (schema v2).
  QLabel* retry = field(QStringLiteral("retry_allowed"));
  if (r->status != RecordStatus::Failed) {
    retry->setText(QStringLiteral("\u2014"));
    retry->setToolTip(QString());
  } else if (r->retryAllowed) {
    retry->setText(QStringLiteral("may be retried: the same request claims it again"));
    retry->setToolTip(QStringLiteral(
        "retry_allowed: the failure certainly did not reach downstream, or a person or the "
        "reconciler settled it FAILED"));
  } else {
    retry->setText(QStringLiteral("final failure: a retry is replayed the error"));
    retry->setToolTip(QStringLiteral(
        "retry_allowed is false: a definite business failure (card declined); the agent hands "
        "the error back to the model instead of running the call again"));
  }
  request_->setPlainText(prettyJson(r->requestPayload));
  response_->setPlainText(prettyJson(r->responsePayload));

  tabs_->setTabText(0, QStringLiteral("Timeline (%1)").arg(selected_->transitions()->rowCount()));
  tabs_->setTabText(1, QStringLiteral("Attempts (%1)").arg(selected_->attempts()->rowCount()));
  const int flows = selected_->fundFlows()->rowCount();
  const int duplicates = selected_->fundFlows()->duplicateCount();
  tabs_->setTabText(2, duplicates > 0 ? QStringLiteral("Fund flows (%1, %2 duplicate%3)")
                                            .arg(flows)
                                            .arg(duplicates)
                                            .arg(duplicates == 1 ? QString() : QStringLiteral("s"))
                                      : QStringLiteral("Fund flows (%1)").arg(flows));
  tabs_->tabBar()->setTabTextColor(
      2, duplicates > 0 ? QColor(0xA3, 0x25, 0x00) : tabs_->tabBar()->tabTextColor(0));
}

}  // namespace idem::admin

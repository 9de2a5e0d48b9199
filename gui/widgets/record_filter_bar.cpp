#include "widgets/record_filter_bar.hpp"

#include <QComboBox>
#include <QCompleter>
#include <QDateTimeEdit>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QToolButton>

#include "models/timestamps.hpp"

namespace idem::admin {
namespace {

// Status choices: the data is the list of statuses, "" for any.
struct StatusChoice {
  const char* label;
  std::vector<RecordStatus> statuses;
};

const std::vector<StatusChoice>& statusChoices() {
  static const std::vector<StatusChoice> choices{
      {"All statuses", {}},
      {"Unsettled (PROCESSING, UNKNOWN)", {RecordStatus::Processing, RecordStatus::Unknown}},
      {"PROCESSING", {RecordStatus::Processing}},
      {"UNKNOWN", {RecordStatus::Unknown}},
      {"SUCCESS", {RecordStatus::Success}},
      {"FAILED", {RecordStatus::Failed}},
  };
  return choices;
}

// Time choices: seconds back from the server's now; 0: any time; -1: the custom range.
constexpr int kCustomRange = -1;
const std::vector<std::pair<const char*, int>>& timeChoices() {
  static const std::vector<std::pair<const char*, int>> choices{
      {"Any time", 0},          {"Last 15 minutes", 15 * 60}, {"Last hour", 3600},
      {"Last 24 hours", 86400}, {"Last 7 days", 7 * 86400},   {"Custom range\u2026", kCustomRange},
  };
  return choices;
}

const std::vector<std::pair<const char*, RecordOrder>>& orderChoices() {
  static const std::vector<std::pair<const char*, RecordOrder>> choices{
      {"Updated, newest first", RecordOrder::UpdatedDesc},
      {"Updated, oldest first", RecordOrder::UpdatedAsc},
      {"Created, newest first", RecordOrder::CreatedDesc},
      {"Created, oldest first", RecordOrder::CreatedAsc},
  };
  return choices;
}

QLabel* caption(const QString& text, QWidget* parent) {
  auto* label = new QLabel(text, parent);
  label->setStyleSheet(QStringLiteral("color: palette(mid);"));
  return label;
}

}  // namespace

RecordFilterBar::RecordFilterBar(QWidget* parent)
    : QWidget(parent),
      status_(new QComboBox(this)),
      bizType_(new QComboBox(this)),
      key_(new QLineEdit(this)),
      bizIdPrefix_(new QLineEdit(this)),
      time_(new QComboBox(this)),
      from_(new QDateTimeEdit(this)),
      to_(new QDateTimeEdit(this)),
      order_(new QComboBox(this)),
      clear_(new QToolButton(this)) {
  setObjectName(QStringLiteral("recordFilterBar"));
  setUpFields();
  layOutFields();
  wireSignals();
  // The table starts with this filter; only changes are announced.
  lastEmitted_ = filter();
}

void RecordFilterBar::setUpFields() {
  for (const StatusChoice& c : statusChoices()) status_->addItem(QString::fromUtf8(c.label));
  status_->setObjectName(QStringLiteral("filterStatus"));
  status_->setToolTip(QStringLiteral("Status"));

  bizType_->setEditable(true);
  bizType_->setObjectName(QStringLiteral("filterBizType"));
  bizType_->setInsertPolicy(QComboBox::NoInsert);
  bizType_->lineEdit()->setPlaceholderText(QStringLiteral("any biz type"));
  bizType_->setMinimumContentsLength(10);
  bizType_->setToolTip(QStringLiteral("Business type, exact (payment, refund, coupon\u2026)"));
  bizType_->completer()->setCaseSensitivity(Qt::CaseSensitive);

  key_->setObjectName(QStringLiteral("filterKey"));
  key_->setPlaceholderText(QStringLiteral("exact idempotency key"));
  key_->setClearButtonEnabled(true);
  key_->setToolTip(QStringLiteral("The whole idempotency key, exactly (Ctrl+F)"));
  key_->setMinimumWidth(220);

  bizIdPrefix_->setObjectName(QStringLiteral("filterBizIdPrefix"));
  bizIdPrefix_->setPlaceholderText(QStringLiteral("biz id starts with\u2026"));
  bizIdPrefix_->setClearButtonEnabled(true);
  bizIdPrefix_->setToolTip(QStringLiteral("Business id prefix, case-sensitive, no wildcards"));
  bizIdPrefix_->setMinimumWidth(170);

  time_->setObjectName(QStringLiteral("filterTime"));
  for (const auto& [label, seconds] : timeChoices())
    time_->addItem(QString::fromUtf8(label), seconds);
  time_->setToolTip(QStringLiteral("On the column the table is sorted by"));
  for (QDateTimeEdit* edit : {from_, to_}) {
    edit->setCalendarPopup(true);
    edit->setDisplayFormat(QStringLiteral("yyyy-MM-dd HH:mm"));
    edit->setVisible(false);
  }
  from_->setObjectName(QStringLiteral("filterFrom"));
  to_->setObjectName(QStringLiteral("filterTo"));

  order_->setObjectName(QStringLiteral("filterOrder"));
  for (const auto& [label, order] : orderChoices())
    order_->addItem(QString::fromUtf8(label), static_cast<int>(order));

  clear_->setText(QStringLiteral("Clear"));
  clear_->setToolTip(QStringLiteral("Clear every filter"));
  clear_->setAutoRaise(true);
}

void RecordFilterBar::layOutFields() {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->setSpacing(6);
  layout->addWidget(caption(QStringLiteral("Filter"), this));
  layout->addWidget(status_);
  layout->addWidget(bizType_);
  layout->addWidget(key_, 2);
  layout->addWidget(bizIdPrefix_, 1);
  layout->addWidget(time_);
  layout->addWidget(from_);
  layout->addWidget(to_);
  layout->addSpacing(8);
  layout->addWidget(caption(QStringLiteral("Order"), this));
  layout->addWidget(order_);
  layout->addWidget(clear_);
}

// Typing applies after a pause (or at once on Return); a choice from a list applies at once.
void RecordFilterBar::wireSignals() {
  debounce_.setSingleShot(true);
  debounce_.setInterval(350);
  connect(&debounce_, &QTimer::timeout, this, &RecordFilterBar::applyNow);
  connect(key_, &QLineEdit::textChanged, this, &RecordFilterBar::scheduleApply);
  connect(bizIdPrefix_, &QLineEdit::textChanged, this, &RecordFilterBar::scheduleApply);
  connect(bizType_, &QComboBox::currentTextChanged, this, &RecordFilterBar::scheduleApply);
  connect(key_, &QLineEdit::returnPressed, this, &RecordFilterBar::applyNow);
  connect(bizIdPrefix_, &QLineEdit::returnPressed, this, &RecordFilterBar::applyNow);
  connect(status_, &QComboBox::currentIndexChanged, this, &RecordFilterBar::applyNow);
  connect(order_, &QComboBox::currentIndexChanged, this, &RecordFilterBar::applyNow);
  connect(time_, &QComboBox::currentIndexChanged, this, [this] {
    updateCustomRange();
    applyNow();
  });
  connect(from_, &QDateTimeEdit::dateTimeChanged, this, &RecordFilterBar::scheduleApply);
  connect(to_, &QDateTimeEdit::dateTimeChanged, this, &RecordFilterBar::scheduleApply);
  connect(clear_, &QToolButton::clicked, this, &RecordFilterBar::clear);
}

RecordFilter RecordFilterBar::filter() const {
  RecordFilter f;
  const int s = status_->currentIndex();
  if (s >= 0 && s < static_cast<int>(statusChoices().size())) {
    f.statuses = statusChoices()[static_cast<std::size_t>(s)].statuses;
  }
  f.bizType = bizType_->currentText().trimmed().toStdString();
  // Surrounding whitespace comes from pasting; keys and ids never carry it.
  f.key = key_->text().trimmed().toStdString();
  f.bizIdPrefix = bizIdPrefix_->text().trimmed().toStdString();
  const int seconds = time_->currentData().toInt();
  if (seconds > 0) {
    f.within = std::chrono::seconds(seconds);
  } else if (seconds == kCustomRange) {
    f.from = fromDateTime(from_->dateTime());
    f.to = fromDateTime(to_->dateTime());
  }
  f.order = static_cast<RecordOrder>(order_->currentData().toInt());
  return f;
}

void RecordFilterBar::setOrder(RecordOrder order) {
  const int index = order_->findData(static_cast<int>(order));
  if (index >= 0) order_->setCurrentIndex(index);
}

void RecordFilterBar::addKnownBizTypes(const QStringList& bizTypes) {
  // Adding choices is not the operator changing the filter: no signals, and the typed text stays.
  const QSignalBlocker blocker(bizType_);
  const QString current = bizType_->currentText();
  for (const QString& t : bizTypes) {
    if (!t.isEmpty() && bizType_->findText(t, Qt::MatchExactly | Qt::MatchCaseSensitive) < 0) {
      bizType_->addItem(t);
    }
  }
  if (bizType_->currentText() != current) bizType_->setCurrentText(current);
}

void RecordFilterBar::focusSearch() {
  key_->setFocus(Qt::ShortcutFocusReason);
  key_->selectAll();
}

void RecordFilterBar::scheduleApply() {
  debounce_.start();
}

void RecordFilterBar::applyNow() {
  debounce_.stop();
  const RecordFilter f = filter();
  if (f == lastEmitted_) return;
  lastEmitted_ = f;
  emit filterChanged(f);
}

void RecordFilterBar::updateCustomRange() {
  const bool custom = time_->currentData().toInt() == kCustomRange;
  if (custom && from_->isHidden()) {
    const QDateTime now = QDateTime::currentDateTime();
    QSignalBlocker a(from_);
    QSignalBlocker b(to_);
    from_->setDateTime(now.addDays(-1));
    to_->setDateTime(now.addSecs(60));
  }
  from_->setVisible(custom);
  to_->setVisible(custom);
}

void RecordFilterBar::clear() {
  {
    const QSignalBlocker blockers[] = {QSignalBlocker(status_), QSignalBlocker(bizType_),
                                       QSignalBlocker(key_), QSignalBlocker(bizIdPrefix_),
                                       QSignalBlocker(time_)};
    status_->setCurrentIndex(0);
    bizType_->setCurrentText(QString());
    key_->clear();
    bizIdPrefix_->clear();
    time_->setCurrentIndex(0);
  }
  updateCustomRange();
  applyNow();
}

}  // namespace idem::admin

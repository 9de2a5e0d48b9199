#include "models/record_table_model.hpp"

#include <QBrush>
#include <QFont>

#include "models/age_text.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {

RecordTableModel::RecordTableModel(DatabaseSession* session, QObject* parent)
    : KeyedRowsModel(parent), session_(session), pages_(this) {}

bool RecordTableModel::sameContent(const Record& a, const Record& b) const {
  return a.status == b.status && a.version == b.version && a.updatedAt == b.updatedAt &&
         a.leaseExpiresAt == b.leaseExpiresAt && a.lastError == b.lastError &&
         a.attemptCount == b.attemptCount;
}

Timestamp RecordTableModel::serverNow() const {
  return localNow() + clockOffset_;
}

bool RecordTableModel::isStuck(const Record& r) const {
  if (r.status == RecordStatus::Unknown) return true;
  return r.status == RecordStatus::Processing && r.leaseExpiresAt &&
         *r.leaseExpiresAt < serverNow();
}

QVariant RecordTableModel::display(const Record& r, int column) const {
  switch (column) {
    case Status:
      return fromUtf8(format(r.status));
    case Age:
      return ageText(serverNow() - r.updatedAt);
    case Key:
      return fromUtf8(r.idempotencyKey);
    case BizType:
      return fromUtf8(r.bizType);
    case BizId:
      return fromUtf8(r.bizId);
    case Tool:
      return fromUtf8(r.tool);
    case Version:
      return r.version;
    case Attempts:
      return r.attemptCount;
    case Updated:
      return displayTime(r.updatedAt);
    case Created:
      return displayTime(r.createdAt);
    case LeaseExpires:
      return r.leaseExpiresAt ? displayTime(*r.leaseExpiresAt) : QString();
    case LastError: {
      if (!r.lastError) return QString();
      QString line = fromUtf8(*r.lastError);
      line.replace(QLatin1Char('\n'), QLatin1Char(' '));
      return line;
    }
    default:
      return {};
  }
}

QVariant RecordTableModel::exportValue(const Record& r, int column) const {
  switch (column) {
    case Age:
      return static_cast<qlonglong>(
          std::chrono::duration_cast<std::chrono::seconds>(serverNow() - r.updatedAt).count());
    case Updated:
      return isoTime(r.updatedAt);
    case Created:
      return isoTime(r.createdAt);
    case LeaseExpires:
      return r.leaseExpiresAt ? isoTime(*r.leaseExpiresAt) : QString();
    case LastError:
      return r.lastError ? fromUtf8(*r.lastError) : QString();
    default:
      return display(r, column);
  }
}

QVariant RecordTableModel::cellData(const Record& r, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return display(r, column);
    case Qt::ToolTipRole:
      if (column == Age) {
        return QStringLiteral("in %1 since %2 (last change)")
            .arg(fromUtf8(format(r.status)), isoTime(r.updatedAt));
      }
      if (column == Updated || column == Created || column == LeaseExpires) {
        return exportValue(r, column);
      }
      if (column == LastError || column == Key || column == BizId) return exportValue(r, column);
      return {};
    case Qt::BackgroundRole:
      if (column == Status) return QBrush(statusBackground(r.status));
      return {};
    case Qt::ForegroundRole:
      if (column == Status) return QBrush(statusForeground(r.status));
      if (column == Age && isStuck(r)) return QBrush(statusForeground(RecordStatus::Unknown));
      return {};
    case Qt::FontRole:
      if (column == Status || (column == Age && isStuck(r))) {
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      return {};
    case Qt::TextAlignmentRole:
      if (column == Version || column == Attempts || column == Age) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      if (column == Status) return QVariant::fromValue(Qt::AlignCenter);
      return {};
    case KeyRole:
      return fromUtf8(r.idempotencyKey);
    case StatusRole:
      return static_cast<int>(r.status);
    case VersionRole:
      return r.version;
    case StuckRole:
      return isStuck(r);
    case ExportRole:
      return exportValue(r, column);
    default:
      return {};
  }
}

QVariant RecordTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Horizontal && role == Qt::ToolTipRole) {
    switch (section) {
      case Age:
        return QStringLiteral(
            "Time since the record's last change (updated_at), on the server's clock");
      case Version:
        return QStringLiteral("Version: +1 on every status change; settle checks it");
      case Attempts:
        return QStringLiteral("attempt_count: how many times the record was claimed for execution");
      default:
        return {};
    }
  }
  return KeyedRowsModel::headerData(section, orientation, role);  // the titles
}

bool RecordTableModel::canFetchMore(const QModelIndex& parent) const {
  // Not while an answer is going in: the cursor is the last row only once it is all in.
  return !parent.isValid() && hasMore_ && !loading_ && !applying_;
}

void RecordTableModel::fetchMore(const QModelIndex& parent) {
  if (!canFetchMore(parent) || rows_.empty()) return;
  request("read records",
          [filter = filter_, after = cursorOf(rows_.back(), filter_.order),
           limit = pageSize_](pqxx::connection& c) { return readPage(c, filter, after, limit); });
}

void RecordTableModel::setFilter(const RecordFilter& filter) {
  pages_.cancel();  // answers to the old filter are now stale, queued requests skipped
  loading_ = false;
  hasMore_ = false;
  resetRows();
  filter_ = filter;
  requestFirstPage();
}

void RecordTableModel::refresh() {
  if (loading_) return;
  if (rows_.empty()) {
    requestFirstPage();
    return;
  }
  if (!refreshKeepsPosition()) {
    setFilter(filter_);
    return;
  }
  // The loaded span, plus room for the rows that arrived above it since.
  const int limit = static_cast<int>(rows_.size()) + std::max(pageSize_, 1000);
  request("refresh records", [filter = filter_, through = cursorOf(rows_.back(), filter_.order),
                              limit, firstPageLimit = pageSize_](pqxx::connection& c) {
    return readWindow(c, filter, through, limit, firstPageLimit);
  });
}

void RecordTableModel::touchAges() {
  if (rows_.empty()) return;
  emit dataChanged(index(0, Age), index(rowCount() - 1, Age),
                   {Qt::DisplayRole, Qt::ForegroundRole, Qt::FontRole, StuckRole});
}

int RecordTableModel::rowOfKey(const std::string& key) const {
  if (!containsKey(key)) return -1;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].idempotencyKey == key) return static_cast<int>(i);
  }
  return -1;
}

void RecordTableModel::requestFirstPage() {
  // Before the first open there is nobody to ask; the first connection refreshes every table.
  if (session_->state() == ConnectionState::Closed) return;
  request("read records", [filter = filter_, limit = pageSize_](pqxx::connection& c) {
    return readPage(c, filter, std::nullopt, limit);
  });
}

template <typename Fetch>
void RecordTableModel::request(const char* what, Fetch fetch) {
  session_->submit(
      pages_, what, std::move(fetch), [this](const RecordPage& page) { onPageFetched(page); },
      [this](const RequestError& error) { onFetchFailed(QString::fromStdString(error.what())); });
  setLoading(true);
}

void RecordTableModel::setLoading(bool loading) {
  if (loading_ == loading) return;
  loading_ = loading;
  emit loadingChanged(loading);
}

void RecordTableModel::onPageFetched(const RecordPage& page) {
  setLoading(false);
  lastError_.clear();
  lastDatabaseTime_ = page.databaseTime;
  // hasMore first: views and testers ask canFetchMore while the rows go in.
  hasMore_ = page.hasMore;
  applying_ = true;
  if (page.isWindow) {
    emit refreshAboutToApply();
    replaceRows(page.records);
    applying_ = false;
    emit refreshApplied();
  } else {
    appendRows(page.records);
    applying_ = false;
  }
  emit fetched(page);
}

void RecordTableModel::onFetchFailed(const QString& message) {
  setLoading(false);
  lastError_ = message;
  emit fetchFailed(message);
}

}  // namespace idem::admin

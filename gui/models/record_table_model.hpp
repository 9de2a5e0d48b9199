// The records table: idem.records as the operator filtered and ordered it, loaded lazily. The first
// page comes on setFilter; views call fetchMore as they scroll, and each call asks the worker for
// the next page by keyset. refresh() re-reads the loaded span and applies the difference in place.
// The needs-attention queue is the same model over RecordFilter::attention().
#pragma once

#include <QString>
#include <chrono>
#include <string>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"
#include "models/worker_replies.hpp"

namespace idem::admin {

class DatabaseSession;

class RecordTableModel : public KeyedRowsModel<Record, std::string> {
  Q_OBJECT

 public:
  enum Columns {
    Status,
    Age,
    Key,
    BizType,
    BizId,
    Tool,
    Version,
    Attempts,
    Updated,
    Created,
    LeaseExpires,
    LastError,
    ColumnCount
  };
  static constexpr auto kTitles = columnTitles<ColumnCount>(
      "Status", "Age", "Idempotency key", "Biz type", "Biz id", "Tool", "Ver.", "Claims", "Updated",
      "Created", "Lease expires", "Last error");
  enum Roles {
    KeyRole = Qt::UserRole,  // QString: the idempotency key
    StatusRole,              // int: idem::RecordStatus
    VersionRole,             // int
    StuckRole,               // bool: PROCESSING past its lease, or UNKNOWN
    ExportRole,              // exact value for CSV: ISO timestamps, whole texts
  };

  // Refresh re-reads at most this many rows; deeper than that it starts again from the top.
  static constexpr int kRefreshLimit = 10'000;

  explicit RecordTableModel(DatabaseSession* session, QObject* parent = nullptr);

  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;
  bool canFetchMore(const QModelIndex& parent) const override;
  void fetchMore(const QModelIndex& parent) override;

  // Drops what is loaded (stale answers included) and fetches the first page.
  void setFilter(const RecordFilter& filter);
  const RecordFilter& filter() const { return filter_; }
  void setPageSize(int rows) { pageSize_ = rows; }
  int pageSize() const { return pageSize_; }

  // Re-reads the loaded rows in place; the first page when nothing is loaded (after a failure, or
  // before the first connection). Does nothing while a fetch is on its way.
  void refresh();
  // Repaints the age column: ages move with the clock between refreshes.
  void touchAges();

  bool isLoading() const { return loading_; }
  // True while an answer is being applied: selection changes seen meanwhile come from rows
  // moving or leaving, not from the operator.
  bool isApplying() const { return applying_; }
  bool hasMore() const { return hasMore_; }
  // Whether a refresh keeps the operator's place (false when more than kRefreshLimit rows are
  // loaded: refreshing would start again from the top).
  bool refreshKeepsPosition() const { return rowCount() <= kRefreshLimit; }
  const QString& lastError() const { return lastError_; }
  std::chrono::microseconds lastDatabaseTime() const { return lastDatabaseTime_; }

  const Record* recordAt(int row) const { return rowAt(row); }
  int rowOfKey(const std::string& key) const;

  // Server clock minus client clock (ConnectionInfo::clockOffset); ages use the server's clock.
  void setClockOffset(std::chrono::microseconds offset) { clockOffset_ = offset; }

 signals:
  void loadingChanged(bool loading);
  // Around a refresh's changes (not around an appended page), so a view can keep its place.
  void refreshAboutToApply();
  void refreshApplied();
  // A first page, a next page or a refresh arrived and is applied.
  void fetched(const idem::admin::RecordPage& page);
  void fetchFailed(const QString& message);

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const Record& r, int column, int role) const override;
  std::string keyOf(const Record& r) const override { return r.idempotencyKey; }
  bool sameContent(const Record& a, const Record& b) const override;

 private:
  void requestFirstPage();
  // Asks for `fetch` (a page or a window), superseding whatever was asked before.
  template <typename Fetch>
  void request(const char* what, Fetch fetch);
  void setLoading(bool loading);
  void onPageFetched(const RecordPage& page);
  void onFetchFailed(const QString& message);
  QVariant display(const Record& r, int column) const;
  QVariant exportValue(const Record& r, int column) const;
  bool isStuck(const Record& r) const;
  Timestamp serverNow() const;

  DatabaseSession* session_;
  RecordFilter filter_;
  RequestTracker pages_;
  bool loading_ = false;
  bool hasMore_ = false;
  bool applying_ = false;
  int pageSize_ = 200;
  QString lastError_;
  std::chrono::microseconds lastDatabaseTime_{0};
  std::chrono::microseconds clockOffset_{0};
};

}  // namespace idem::admin

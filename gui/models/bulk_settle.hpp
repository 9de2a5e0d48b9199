// Many stuck records settled with one decision and one reason, each through the same checked path
// as the single settle (idem::settleRecord, hence idem.settle with the record's OWN version, read
// when the record was listed): one transaction per record, no statement that settles a set and so
// skips the rules. The database serialises every record against its claimant and against another
// operator; whatever it refuses (conflict, lease_active, money_moved, ...) is a row of the result
// with the function's result code and its sentence.
//
// The records go to the worker thread in chunks, one submit each, so the GUI thread only ever
// appends a chunk's rows. Cancel stops between records: a record is settled once or not touched.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "idem/domain.hpp"
#include "models/keyed_rows_model.hpp"
#include "models/record_filter.hpp"
#include "models/request_tracker.hpp"

namespace idem::admin {

class DatabaseSession;

// One record to settle and the version the operator's list showed for it.
struct BulkTarget {
  std::string key;
  int version = 0;
};

struct BulkDecision {
  RecordStatus to = RecordStatus::Failed;
  std::string reason;
};

// What one record's settle came to.
struct BulkResult {
  enum class Kind { Settled, Refused, Error, NotRun };
  std::string key;
  int expectedVersion = 0;
  Kind kind = Kind::NotRun;
  // The function's result code: ok, conflict, lease_active, money_moved, invalid_transition,
  // not_found; invalid_input (refused before sending); error (the database failed); cancelled.
  std::string code;
  std::string message;         // the checked path's sentence
  std::optional<int> version;  // after the call, or the current one when refused
};

QString bulkResultKindText(BulkResult::Kind kind);

// More than this many records at once is refused: a typo in a filter must not settle a table.
inline constexpr int kBulkSettleCap = 1000;

// Why a bulk settle of `count` records with `decision` may not start (empty: it may), named for
// the operator: too many records, none, a blank reason, a target that is not SUCCESS or FAILED.
QString bulkSettleRefusal(std::size_t count, const BulkDecision& decision);

// "All matching the current filter", as listed on the worker thread: the first kBulkSettleCap
// records in the filter's order with their versions, and how many match (counted up to
// kBulkCountLimit; beyond it `matching` is kBulkCountLimit + 1).
inline constexpr int kBulkCountLimit = 100'000;
struct BulkListing {
  std::vector<BulkTarget> targets;
  qint64 matching = 0;
};
BulkListing listMatching(pqxx::connection& c, const RecordFilter& filter);

// The worker's side: settles each target in turn through idem::settleRecord, until `cancelled`
// is seen between two records. A database failure that ends the session stops the chunk; the
// records settled before it are in `done` (filled as it goes, so a throw keeps them).
void settleChunk(pqxx::connection& c, const std::vector<BulkTarget>& chunk,
                 const BulkDecision& decision, int batchSize, const std::atomic<bool>& cancelled,
                 std::vector<BulkResult>& done);

// The result table: one row per record, in the order they were settled.
class BulkResultModel : public KeyedRowsModel<BulkResult, std::string> {
  Q_OBJECT

 public:
  enum Columns { Key, ExpectedVersion, Result, Code, Version, Message, ColumnCount };
  static constexpr auto kTitles = columnTitles<ColumnCount>(
      "Idempotency key", "Listed version", "Result", "Code", "Version now", "Message");
  enum Roles {
    KindRole = Qt::UserRole,  // int: BulkResult::Kind
    CodeRole,                 // QString: the result code
    ExportRole,
  };

  using KeyedRowsModel::KeyedRowsModel;

  void append(std::vector<BulkResult> results) { appendRows(std::move(results)); }
  void clear() { resetRows(); }
  int count(BulkResult::Kind kind) const;
  // "480 settled, 20 refused (conflict 20)"
  QString summary() const;

 protected:
  std::span<const char* const> titles() const override { return kTitles; }
  QVariant cellData(const BulkResult& r, int column, int role) const override;
  std::string keyOf(const BulkResult& r) const override { return r.key; }
  bool sameContent(const BulkResult&, const BulkResult&) const override { return false; }
};

// One bulk settle run, driven from the GUI thread.
class BulkSettle : public QObject {
  Q_OBJECT

 public:
  static constexpr int kDefaultChunk = 20;

  explicit BulkSettle(DatabaseSession* session, QObject* parent = nullptr);
  // Stops the run between records; the chunk under way finishes its current record only.
  ~BulkSettle() override;

  void setChunkSize(int records) { chunkSize_ = std::max(1, records); }

  // Starts settling; false (and refusal() says why) when refused before anything is sent.
  bool start(std::vector<BulkTarget> targets, BulkDecision decision);
  // Stops between records: what is settled stays settled, the rest is listed as not run.
  void cancel();

  bool isRunning() const { return running_; }
  bool wasCancelled() const { return cancelled_->load(); }
  int total() const { return static_cast<int>(targets_.size()); }
  int processed() const { return results_.rowCount(); }
  const QString& refusal() const { return refusal_; }
  BulkResultModel* results() { return &results_; }
  const BulkResultModel* results() const { return &results_; }

 signals:
  void progressed(int processed, int total);
  void finished();

 private:
  void submitNextChunk();
  void onChunkDone(const std::vector<BulkResult>& done, const QString& error);
  void finish();

  DatabaseSession* session_;
  RequestTracker chunks_{this, RequestTracker::Policy::AlwaysRun};
  std::vector<BulkTarget> targets_;
  BulkDecision decision_;
  std::size_t next_ = 0;  // the first target not yet sent
  int chunkSize_ = kDefaultChunk;
  bool running_ = false;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  QString refusal_;
  QString stopReason_;  // the error that stopped the run; empty: it ran out or was cancelled
  BulkResultModel results_;
};

}  // namespace idem::admin

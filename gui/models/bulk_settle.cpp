#include "models/bulk_settle.hpp"

#include <QBrush>
#include <QLocale>
#include <algorithm>
#include <map>
#include <pqxx/pqxx>
#include <unordered_set>

#include "idem/database_error.hpp"
#include "models/database_session.hpp"
#include "models/database_worker.hpp"
#include "models/record_page_query.hpp"
#include "models/status_palette.hpp"
#include "models/utf8_text.hpp"

namespace idem::admin {
namespace {

QString number(qint64 n) {
  return QLocale(QLocale::English).toString(n);
}

BulkResult resultOf(const BulkTarget& target, const idem::SettleOutcome& outcome) {
  BulkResult r;
  r.key = target.key;
  r.expectedVersion = target.version;
  r.message = outcome.message;
  r.version = outcome.change.version;
  if (outcome.verdict == SettleVerdict(ResultCode::Ok)) {
    r.kind = BulkResult::Kind::Settled;
    r.code = format(ResultCode::Ok);
  } else if (outcome.verdict == kSettleInputRefused) {
    r.kind = BulkResult::Kind::Refused;
    r.code = "invalid_input";
  } else {
    r.kind = BulkResult::Kind::Refused;
    r.code = format(*outcome.verdict);
  }
  return r;
}

QColor kindColour(BulkResult::Kind kind) {
  switch (kind) {
    case BulkResult::Kind::Settled:
      return toneColor(Tone::Settleable);
    case BulkResult::Kind::Refused:
      return toneColor(Tone::Waiting);
    case BulkResult::Kind::Error:
      return toneColor(Tone::ErrorText);
    case BulkResult::Kind::NotRun:
      return toneColor(Tone::MutedText);
  }
  return {};
}

}  // namespace

QString bulkResultKindText(BulkResult::Kind kind) {
  switch (kind) {
    case BulkResult::Kind::Settled:
      return QStringLiteral("settled");
    case BulkResult::Kind::Refused:
      return QStringLiteral("refused");
    case BulkResult::Kind::Error:
      return QStringLiteral("error");
    case BulkResult::Kind::NotRun:
      return QStringLiteral("not run");
  }
  return {};
}

QString bulkSettleRefusal(std::size_t count, const BulkDecision& decision) {
  if (count == 0) return QStringLiteral("no records are selected: nothing to settle");
  if (count > static_cast<std::size_t>(kBulkSettleCap)) {
    return QStringLiteral(
               "%1 records is more than the bulk settle cap of %2: narrow the filter or the "
               "selection; nothing was sent")
        .arg(number(static_cast<qint64>(count)), number(kBulkSettleCap));
  }
  // The single settle's own checks (target status, a reason that is not blank), asked once for
  // the whole run instead of being refused a thousand times.
  idem::SettleRequest sample;
  sample.key = "bulk";
  sample.to = decision.to;
  sample.reason = decision.reason;
  const std::vector<std::string> problems = idem::validateSettleRequest(sample);
  return problems.empty() ? QString() : fromUtf8(problems.front());
}

BulkListing listMatching(pqxx::connection& c, const RecordFilter& filter) {
  return idem::translatingErrors("list the matching records", [&] {
    // One snapshot: the count and the versions listed agree.
    pqxx::read_transaction tx(c);
    BulkListing out;
    const BoundQuery counted = pageQuery(filter, std::nullopt, kBulkCountLimit + 1);
    out.matching = tx.exec_params("SELECT count(*) FROM (" + counted.sql + ") AS matching",
                                  pqxx::prepare::make_dynamic_params(counted.params))[0][0]
                       .as<qint64>();
    const BoundQuery listed = pageQuery(filter, std::nullopt, kBulkSettleCap);
    for (const pqxx::row& row :
         tx.exec_params(listed.sql, pqxx::prepare::make_dynamic_params(listed.params))) {
      const Record r = recordFromListRow(row);
      out.targets.push_back({r.idempotencyKey, r.version});
    }
    tx.commit();
    return out;
  });
}

void settleChunk(pqxx::connection& c, const std::vector<BulkTarget>& chunk,
                 const BulkDecision& decision, int batchSize, const std::atomic<bool>& cancelled,
                 std::vector<BulkResult>& done) {
  // The batch is named in every transition's evidence, so the history tells a bulk decision apart.
  const std::string evidence = R"({"bulk_settle": {"records": )" + std::to_string(batchSize) + "}}";
  for (const BulkTarget& target : chunk) {
    if (cancelled.load()) return;
    idem::SettleRequest request;
    request.key = target.key;
    request.expectedVersion = target.version;
    request.to = decision.to;
    request.reason = decision.reason;
    request.evidence = evidence;
    try {
      done.push_back(resultOf(target, settle(c, request)));
    } catch (const idem::DatabaseError& e) {
      BulkResult r;
      r.key = target.key;
      r.expectedVersion = target.version;
      r.kind = BulkResult::Kind::Error;
      r.code = "error";
      r.message = e.what();
      done.push_back(std::move(r));
      if (e.endsSession()) throw;  // the worker reconnects; the run stops here
    }
  }
}

QVariant BulkResultModel::cellData(const BulkResult& r, int column, int role) const {
  switch (role) {
    case Qt::DisplayRole:
    case ExportRole:
      switch (column) {
        case Key:
          return fromUtf8(r.key);
        case ExpectedVersion:
          return r.expectedVersion;
        case Result:
          return bulkResultKindText(r.kind);
        case Code:
          return fromUtf8(r.code);
        case Version:
          return r.version ? QVariant(*r.version) : QVariant(QString());
        case Message:
          return fromUtf8(r.message);
        default:
          return {};
      }
    case Qt::ToolTipRole:
      return column == Message || column == Key ? fromUtf8(column == Key ? r.key : r.message)
                                                : QVariant();
    case Qt::ForegroundRole:
      return column == Result || column == Code ? QVariant(QBrush(kindColour(r.kind))) : QVariant();
    case KindRole:
      return static_cast<int>(r.kind);
    case CodeRole:
      return fromUtf8(r.code);
    default:
      return {};
  }
}

int BulkResultModel::count(BulkResult::Kind kind) const {
  return static_cast<int>(std::count_if(rows_.begin(), rows_.end(),
                                        [kind](const BulkResult& r) { return r.kind == kind; }));
}

QString BulkResultModel::summary() const {
  std::map<std::string, int> refusedBy;
  for (const BulkResult& r : rows_) {
    if (r.kind == BulkResult::Kind::Refused) ++refusedBy[r.code];
  }
  QStringList why;
  for (const auto& [code, n] : refusedBy)
    why << QStringLiteral("%1 %2").arg(fromUtf8(code), number(n));
  QString text =
      QStringLiteral("%1 settled, %2 refused")
          .arg(number(count(BulkResult::Kind::Settled)), number(count(BulkResult::Kind::Refused)));
  if (!why.isEmpty()) text += QStringLiteral(" (%1)").arg(why.join(QStringLiteral(", ")));
  if (const int errors = count(BulkResult::Kind::Error)) {
    text += QStringLiteral(", %1 failed").arg(number(errors));
  }
  if (const int notRun = count(BulkResult::Kind::NotRun)) {
    text += QStringLiteral(", %1 not run").arg(number(notRun));
  }
  return text;
}

BulkSettle::BulkSettle(DatabaseSession* session, QObject* parent)
    : QObject(parent), session_(session) {}

BulkSettle::~BulkSettle() {
  cancelled_->store(true);
}

bool BulkSettle::start(std::vector<BulkTarget> targets, BulkDecision decision) {
  if (running_) {
    refusal_ = QStringLiteral("a bulk settle is already running");
    return false;
  }
  // A key listed twice is settled once.
  std::unordered_set<std::string> seen;
  std::erase_if(targets, [&](const BulkTarget& t) { return !seen.insert(t.key).second; });
  refusal_ = bulkSettleRefusal(targets.size(), decision);
  if (!refusal_.isEmpty()) return false;
  targets_ = std::move(targets);
  decision_ = std::move(decision);
  next_ = 0;
  stopReason_.clear();
  results_.clear();
  cancelled_ = std::make_shared<std::atomic<bool>>(false);
  running_ = true;
  submitNextChunk();
  return true;
}

void BulkSettle::cancel() {
  cancelled_->store(true);
}

void BulkSettle::submitNextChunk() {
  if (cancelled_->load() || next_ >= targets_.size()) {
    finish();
    return;
  }
  const std::size_t end = std::min(targets_.size(), next_ + static_cast<std::size_t>(chunkSize_));
  std::vector<BulkTarget> chunk(targets_.begin() + static_cast<std::ptrdiff_t>(next_),
                                targets_.begin() + static_cast<std::ptrdiff_t>(end));
  next_ = end;
  // Filled on the worker as records are settled, read here only once the reply (or the error)
  // has been queued back: the queued call orders the two.
  auto done = std::make_shared<std::vector<BulkResult>>();
  session_->submit(
      chunks_, "bulk settle",
      [chunk = std::move(chunk), decision = decision_, batch = total(), cancelled = cancelled_,
       done](pqxx::connection& c) {
        settleChunk(c, chunk, decision, batch, *cancelled, *done);
        return true;
      },
      [this, done](bool) { onChunkDone(std::move(*done), {}); },
      [this, done](const RequestError& e) {
        onChunkDone(std::move(*done), QString::fromUtf8(e.what()));
      });
}

void BulkSettle::onChunkDone(const std::vector<BulkResult>& done, const QString& error) {
  results_.append(done);
  emit progressed(processed(), total());
  if (!error.isEmpty()) {
    stopReason_ = error;
    finish();
    return;
  }
  submitNextChunk();
}

void BulkSettle::finish() {
  // Every record the run did not reach is listed, so the table accounts for each one.
  std::vector<BulkResult> notRun;
  for (std::size_t i = static_cast<std::size_t>(processed()); i < targets_.size(); ++i) {
    BulkResult r;
    r.key = targets_[i].key;
    r.expectedVersion = targets_[i].version;
    r.kind = BulkResult::Kind::NotRun;
    r.code = stopReason_.isEmpty() ? "cancelled" : "not_run";
    r.message = stopReason_.isEmpty()
                    ? "not sent: the bulk settle was cancelled before this record"
                    : "not sent: the bulk settle stopped at an error: " + stopReason_.toStdString();
    notRun.push_back(std::move(r));
  }
  results_.append(std::move(notRun));
  running_ = false;
  emit finished();
}

}  // namespace idem::admin

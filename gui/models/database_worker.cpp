#include "models/database_worker.hpp"

#include <QThread>
#include <chrono>
#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/record_queries.hpp"
#include "idem/sql_fragments.hpp"
#include "models/record_page_query.hpp"
#include "models/timestamps.hpp"

namespace idem::admin {
namespace {

using Clock = std::chrono::steady_clock;

// Who is connected and whether it may settle. pg_has_role raises for a role that does not exist,
// hence the CASE (evaluated in order) around it.
constexpr const char* kDescribe =
    "SELECT current_user, current_database(), current_setting('server_version'), r.rolsuper, "
    "  r.rolsuper OR CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idem_operator') "
    "    THEN pg_has_role(current_user, 'idem_operator', 'MEMBER') ELSE false END, "
    "  to_regclass('idem.records') IS NOT NULL, "
    "  CASE WHEN to_regclass('idem.records') IS NOT NULL "
    "    THEN has_table_privilege(current_user, 'idem.records', 'SELECT') ELSE false END, "
    "  " IDEM_SQL_MICROS("clock_timestamp()") " "
    "FROM pg_roles r WHERE r.rolname = current_user";

// Served by records_unsettled: cheap however large the table is, as long as few records are stuck.
constexpr const char* kCounts =
    "SELECT count(*) FILTER (WHERE status = 'PROCESSING'), "
    "       count(*) FILTER (WHERE idem.lease_expired(status, lease_expires_at)), "
    "       count(*) FILTER (WHERE status = 'UNKNOWN'), "
    "       (SELECT reltuples::bigint FROM pg_class WHERE oid = 'idem.records'::regclass) "
    "FROM idem.records WHERE status IN ('PROCESSING', 'UNKNOWN')";

std::vector<Record> readRecords(pqxx::transaction_base& tx, const BoundQuery& q) {
  std::vector<Record> out;
  const pqxx::result rows = tx.exec_params(q.sql, pqxx::prepare::make_dynamic_params(q.params));
  out.reserve(rows.size());
  for (const pqxx::row& row : rows) out.push_back(recordFromListRow(row));
  return out;
}

bool exists(pqxx::transaction_base& tx, const BoundQuery& q) {
  return tx.exec_params(q.sql, pqxx::prepare::make_dynamic_params(q.params))[0][0].as<bool>();
}

// Any exception out of a request as a classified DatabaseError, worded "what: why".
idem::DatabaseError failureOf(const std::exception_ptr& error, const char* what) {
  if (auto e = idem::asDatabaseError(error, what)) return *e;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return idem::DatabaseError("", std::string(what) + ": " + e.what());
  } catch (...) {
    return idem::DatabaseError("", std::string(what) + ": unknown error");
  }
}

}  // namespace

DatabaseWorker::DatabaseWorker(QObject* parent) : QObject(parent), retryTimer_(new QTimer(this)) {
  retryTimer_->setSingleShot(true);
  connect(retryTimer_, &QTimer::timeout, this, &DatabaseWorker::connectNow);
}

DatabaseWorker::~DatabaseWorker() = default;

void DatabaseWorker::open(const idem::ConnectionSettings& settings, ReconnectBackoff backoff) {
  settings_ = settings;
  backoff_ = backoff;
  backoff_.reset();
  retryTimer_->stop();
  connection_.reset();
  connectNow();
}

void DatabaseWorker::close() {
  settings_.reset();
  retryTimer_->stop();
  connection_.reset();
  emit disconnected(QStringLiteral("closed"), -1, false);
}

void DatabaseWorker::connectNow() {
  if (!settings_) return;
  try {
    connection_ = idem::connect(*settings_);
    const ConnectionInfo info = describeConnection();
    backoff_.reset();
    emit connected(info);
  } catch (...) {
    connection_.reset();
    const idem::DatabaseError error = failureOf(std::current_exception(), "connect");
    const QString message = QString::fromStdString(error.what());
    if (error.kind() == idem::DatabaseErrorKind::NeedsPassword) {
      // Retrying cannot help: a person must type a password or fix ~/.pgpass.
      emit disconnected(message, -1, true);
      return;
    }
    const int wait = static_cast<int>(backoff_.next().count());
    retryTimer_->start(wait);
    emit disconnected(message, wait, false);
  }
}

ConnectionInfo DatabaseWorker::describeConnection() {
  ConnectionInfo info;
  const Timestamp before = localNow();
  const idem::StatementTimeoutScope timeout(settings_->statementTimeout);
  const pqxx::result r = idem::translatingErrors("describe the connection", [&] {
    return idem::boundedCall(*connection_,
                             [](pqxx::transaction_base& tx) { return tx.exec(kDescribe); });
  });
  const Timestamp after = localNow();
  if (r.empty()) throw idem::DatabaseError("", "the connected role is not in pg_roles");
  const pqxx::row row = r[0];
  info.role = QString::fromUtf8(row[0].c_str());
  info.database = QString::fromUtf8(row[1].c_str());
  info.serverVersion = QString::fromUtf8(row[2].c_str());
  info.isSuperuser = row[3].as<bool>();
  info.isOperator = row[4].as<bool>();
  if (!row[5].as<bool>()) {
    throw idem::DatabaseError("3F000", "database " + std::string(row[1].c_str()) +
                                           " has no idem schema: run `idemctl migrate` first");
  }
  if (!row[6].as<bool>()) {
    throw idem::DatabaseError("42501", "role " + std::string(row[0].c_str()) +
                                           " may not read idem.records: grant it idem_operator "
                                           "(or idem_reader for read-only use)");
  }
  info.operatorMoves = idem::boundedCall(
      *connection_, [](pqxx::transaction_base& tx) { return readOperatorMoves(tx); });
  const auto serverNow = std::chrono::microseconds(row[7].as<long long>());
  const auto middle = before.time_since_epoch() + (after - before) / 2;
  info.clockOffset = serverNow - middle;
  const char* host = connection_->hostname();
  const char* port = connection_->port();
  info.server = QStringLiteral("%1:%2").arg(QString::fromUtf8(host ? host : "?"),
                                            QString::fromUtf8(port ? port : "?"));
  info.source = QString::fromStdString(settings_->source);
  return info;
}

void DatabaseWorker::loseConnection(const QString& message) {
  connection_.reset();
  if (!settings_) return;
  const int wait = static_cast<int>(backoff_.next().count());
  retryTimer_->start(wait);
  emit disconnected(message, wait, false);
}

bool DatabaseWorker::run(const RequestTracker::Request& request, const char* what,
                         const std::function<void(pqxx::connection&)>& work,
                         const std::function<void(const idem::DatabaseError&)>& fail) {
  if (request.isSkippable()) return false;
  if (!connection_) {
    fail(idem::DatabaseError("08003", "not connected to the database"));
    return true;
  }
  try {
    const idem::StatementTimeoutScope timeout(settings_->statementTimeout);
    work(*connection_);
    return true;
  } catch (...) {
    idem::DatabaseError error = failureOf(std::current_exception(), what);
    if (!error.endsSession() && !connection_->is_open()) {
      error = idem::DatabaseError("08006", error.what());  // libpq noticed before the server said
    }
    fail(error);
    if (error.endsSession()) loseConnection(QString::fromStdString(error.what()));
    return true;
  }
}

RecordPage readPage(pqxx::connection& c, const RecordFilter& filter,
                    const std::optional<RecordCursor>& after, int limit) {
  const auto start = Clock::now();
  // One row more than asked tells whether another page follows, without a second query.
  RecordPage page;
  page.records = idem::boundedCall(c, [&](pqxx::transaction_base& tx) {
    return readRecords(tx, pageQuery(filter, after, limit + 1));
  });
  page.hasMore = static_cast<int>(page.records.size()) > limit;
  if (page.hasMore) page.records.pop_back();
  page.databaseTime = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  return page;
}

RecordPage readWindow(pqxx::connection& c, const RecordFilter& filter, const RecordCursor& through,
                      int limit, int firstPageLimit) {
  const auto start = Clock::now();
  // Both statements see one snapshot, so "is there more" matches the window it follows.
  idem::ReadTransaction tx(c);
  RecordPage page;
  page.isWindow = true;
  page.records = readRecords(tx, windowQuery(filter, through, limit));
  if (page.records.empty()) {
    // Everything loaded has gone (purged, or moved out of the filter): start from the top.
    page.records = readRecords(tx, pageQuery(filter, std::nullopt, firstPageLimit + 1));
    page.hasMore = static_cast<int>(page.records.size()) > firstPageLimit;
    if (page.hasMore) page.records.pop_back();
  } else {
    page.hasMore = exists(tx, moreAfterQuery(filter, cursorOf(page.records.back(), filter.order)));
  }
  tx.commit();
  page.databaseTime = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  return page;
}

RecordEvidence readEvidence(pqxx::connection& c, const std::string& key) {
  RecordEvidence evidence;
  evidence.key = key;
  idem::ReadTransaction tx(c);
  evidence.record = idem::findRecord(tx, key);
  if (evidence.record) {
    evidence.transitions = idem::transitionsOf(tx, key);
    evidence.attempts = idem::attemptsOf(tx, key);
    evidence.fundFlows = idem::fundFlowsOf(tx, evidence.record->bizType, evidence.record->bizId);
  }
  tx.commit();
  return evidence;
}

UnsettledCounts readCounts(pqxx::connection& c) {
  const pqxx::row r = idem::translatingErrors("count stuck records", [&] {
    return idem::boundedCall(c, [](pqxx::transaction_base& tx) { return tx.exec(kCounts)[0]; });
  });
  UnsettledCounts counts;
  counts.processing = r[0].as<qint64>();
  counts.processingPastLease = r[1].as<qint64>();
  counts.unknown = r[2].as<qint64>();
  counts.estimatedRecords = r[3].is_null() ? -1 : r[3].as<qint64>();
  return counts;
}

idem::SettleAssessment assess(pqxx::connection& c, const std::string& key, RecordStatus to,
                              bool overrideSideEffect) {
  return idem::translatingErrors(
      "weigh the evidence", [&] { return idem::assessSettle(c, key, to, overrideSideEffect); });
}

idem::SettleOutcome settle(pqxx::connection& c, const idem::SettleRequest& request) {
  try {
    return idem::translatingErrors("settle", [&] { return idem::settleRecord(c, request); });
  } catch (const idem::DatabaseError& e) {
    if (!e.isConnectionLoss() && c.is_open()) throw;
    // The call may have reached the server before the connection went: say so plainly.
    throw idem::DatabaseError(
        e.sqlstate().empty() ? "08006" : e.sqlstate(),
        std::string(e.what()) +
            ". The decision may or may not have been written: check the record's timeline "
            "once the connection is back before settling again.");
  }
}

}  // namespace idem::admin

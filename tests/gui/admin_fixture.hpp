// Shared by the admin app's suites: records in every state seeded through the protocol functions,
// bulk rows with chosen timestamps, and waiting for asynchronous models without fixed sleeps.
#pragma once

#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "idem/connection_settings.hpp"
#include "idem/protocol_client.hpp"
#include "test_database.hpp"

namespace idem::admin {
class DatabaseSession;
class RecordTableModel;
}  // namespace idem::admin

namespace idem::test {

// One record per situation an operator meets; each on its own business object.
struct AdminScenario {
  std::string processingFresh;     // PROCESSING, lease still running (30 s): not stuck yet
  std::string freshToken;          // its claim token: the claimant may still answer
  std::string processingExpired;   // PROCESSING past its lease: stuck
  std::string unknown;             // UNKNOWN, no fund flow recorded
  std::string unknownWithDebit;    // UNKNOWN, a DEBIT flow recorded
  std::string unknownDoubleDebit;  // UNKNOWN, two DEBITs under different gateway refs
  std::string success;
  std::string failed;  // FAILED, final (card declined: retry_allowed false), no fund flow
};

AdminScenario seedScenario(pqxx::connection& connection);

// begin, which must be `executed`: the claim with its token (throws otherwise).
Claim claim(ProtocolClient& client, const BeginRequest& request);

BeginRequest paymentRequest(const std::string& key, const std::string& bizId,
                            std::chrono::milliseconds lease = std::chrono::seconds(30));

ConnectionSettings settingsFor(const std::string& dsn);

// The suites' shared session: a DatabaseSession opened on dsn, as the app opens one, once it is
// connected or timeoutMs is over (the caller checks isConnected()).
std::unique_ptr<admin::DatabaseSession> connectedSession(const std::string& dsn,
                                                         int timeoutMs = 15000);

// Runs sql as the owner with the records triggers disabled, in one transaction: rows with chosen
// timestamps, statuses and versions, without the history a real change would write.
void execWithoutRecordTriggers(const TestDatabase& db, const std::string& sql);

// Test data in bulk, written as execWithoutRecordTriggers does: `count` records of one biz type,
// tool and status, for n = 1..count the key keyPrefix + n (n zero-padded to keyDigits when set,
// so that keys sort as text) and the biz id "cp-" + n, created and updated n * step before now.
struct BulkRecords {
  std::string keyPrefix;
  std::string bizType;
  std::string tool;
  std::string status;
  int count = 0;
  std::string step = "1 minute";
  int keyDigits = 0;
};
void insertBulkRecords(const TestDatabase& db, const BulkRecords& records);

// Processes events until ready() or the deadline; true if ready.
bool waitUntil(const std::function<bool()>& ready, int timeoutMs = 15000);

// Fetches until the model has everything; false on a timeout or a failed fetch.
bool loadEverything(admin::RecordTableModel& model, int timeoutMs = 30000);

std::vector<std::string> keysOf(const admin::RecordTableModel& model);
std::vector<std::string> keysBySql(const TestDatabase& db, const std::string& sql);
std::string textBySql(const TestDatabase& db, const std::string& sql);

}  // namespace idem::test

// What the database worker sends back to the GUI thread: plain values, handed across the thread
// boundary by DatabaseSession::submit. Nothing here refers to the connection.
#pragma once

#include <QMetaType>
#include <QString>
#include <chrono>
#include <optional>
#include <vector>

#include "idem/domain.hpp"
#include "idem/settlement.hpp"
#include "models/settle_availability.hpp"

namespace idem::admin {

struct RecordPage {
  std::vector<Record> records;
  bool hasMore = false;   // rows follow the last one
  bool isWindow = false;  // a refresh of the loaded span, not the next page
  std::chrono::microseconds databaseTime{0};
};

// One record and everything that explains it.
struct RecordEvidence {
  std::string key;
  std::optional<Record> record;         // empty: no such key (any more)
  std::vector<Transition> transitions;  // oldest first
  std::vector<Attempt> attempts;        // newest first
  std::vector<FundFlow> fundFlows;      // of its business object
};

struct UnsettledCounts {
  qint64 processing = 0;
  qint64 processingPastLease = 0;
  qint64 unknown = 0;
  qint64 estimatedRecords = -1;  // the planner's estimate of the table size; -1: unknown
};

struct ConnectionInfo {
  QString role;  // current_user: the actor in idem.transitions
  QString database;
  QString server;  // host:port, or the socket folder
  QString serverVersion;
  QString source;           // --db.dsn, IDEMWATCH_DSN, the dialog...
  bool isOperator = false;  // member of idem_operator, or superuser: may settle
  bool isSuperuser = false;
  // Server clock minus client clock, so ages are measured on the server's clock.
  std::chrono::microseconds clockOffset{0};
  // The state machine as the database states it for an operator (idem.transition_allowed).
  OperatorMoves operatorMoves;
};

}  // namespace idem::admin

// The worker's `connected` signal carries it to the session's thread.
Q_DECLARE_METATYPE(idem::admin::ConnectionInfo)

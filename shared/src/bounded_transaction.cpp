#include "idem/bounded_transaction.hpp"

#include <string>

namespace idem {
namespace {

thread_local std::chrono::milliseconds statementTimeout{0};

}  // namespace

StatementTimeoutScope::StatementTimeoutScope(std::chrono::milliseconds timeout)
    : previous_(statementTimeout) {
  statementTimeout = timeout;
}

StatementTimeoutScope::~StatementTimeoutScope() {
  statementTimeout = previous_;
}

std::chrono::milliseconds currentStatementTimeout() {
  return statementTimeout;
}

void applyTimeouts(pqxx::dbtransaction& tx) {
  if (statementTimeout.count() <= 0) return;
  // is_local = true: SET LOCAL, gone at this transaction's COMMIT or ROLLBACK.
  tx.exec_params("SELECT pg_catalog.set_config('statement_timeout', $1, true)",
                 std::to_string(statementTimeout.count()));
}

}  // namespace idem

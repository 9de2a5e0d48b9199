// A login role's own session: its connection and a protocol client on it, so that a suite plays
// each party (an agent, the gateway's webhook, an operator) with exactly the rights a deployment
// gives it. Header-only, for the suites that link idem_shared.
#pragma once

#include <pqxx/pqxx>
#include <string>

#include "idem/protocol_client.hpp"
#include "test_database.hpp"

namespace idem::test {

struct LoginSession {
  LoginSession(const TestDatabase& db, const std::string& role)
      : connection(db.dsnAs(role)), client(connection) {}
  pqxx::connection connection;
  ProtocolClient client;

  // The SQLSTATE of running sql as this login, empty when it succeeds.
  std::string sqlstateOf(const std::string& sql) { return test::sqlstateOf(connection, sql); }
  // The first column of the first row as text ("<null>" for none).
  std::string firstField(const std::string& sql) {
    pqxx::nontransaction tx(connection);
    const auto r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? "<null>" : r[0][0].c_str();
  }
};

}  // namespace idem::test

#include "idem/session_role.hpp"

#include <pqxx/pqxx>

#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"

namespace idem {
namespace {

constexpr const char* kMembership = "SELECT pg_has_role(session_user, $1, 'MEMBER'), session_user";

}  // namespace

SessionRole sessionMembership(pqxx::connection& connection, const std::string& role,
                              const char* what) {
  return translatingErrors(what, [&] {
    return boundedCall(connection, [&](pqxx::transaction_base& tx) {
      const pqxx::row r = tx.exec_params1(kMembership, role);
      return SessionRole{r[1].c_str(), r[0].as<bool>()};
    });
  });
}

}  // namespace idem

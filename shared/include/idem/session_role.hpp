// Whether the logged-in role may do what a tool is about to do: asked once, before the first
// round, so that a login without the role is told so by name instead of failing every round with
// "permission denied". idemctl reconcile and the simulator ask it.
#pragma once

#include <pqxx/connection>
#include <string>

namespace idem {

struct SessionRole {
  std::string login;  // session_user
  bool member = false;
};

// Is session_user a member of `role` (directly or through other roles)? `what` is the context of a
// DatabaseError, as in translatingErrors.
SessionRole sessionMembership(pqxx::connection& connection, const std::string& role,
                              const char* what);

}  // namespace idem

// The idem schema as the catalog holds it, as text two databases can be compared by: every
// table's columns (name, type, nullability, default, identity), constraint, index, domain and its
// constraints, composite type, sequence, function (pg_get_functiondef), view, trigger, owner,
// grant and comment, and the business types the schema declares, each on lines of its own in a
// stable order. Object ids, dropped columns and the migration bookkeeping tables
// (schema_migrations, schema_objects) are left out: they say how a database got here, not what it
// is.
#pragma once

#include <pqxx/connection>
#include <string>

namespace idem::test {

std::string schemaCatalog(pqxx::connection& connection);

}  // namespace idem::test

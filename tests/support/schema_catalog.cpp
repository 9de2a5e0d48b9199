#include "schema_catalog.hpp"

#include <pqxx/pqxx>

namespace idem::test {
namespace {

constexpr const char* kCatalog = R"SQL(
WITH rel AS (
    SELECT c.oid, c.relname, c.relkind, c.relowner, c.relacl
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace = 'idem'::regnamespace
       AND c.relname NOT IN ('schema_migrations', 'schema_migrations_pkey', 'schema_objects',
                             'schema_objects_pkey'))
SELECT line FROM (
    SELECT 'relation ' || relname || ' kind ' || relkind::text || ' owner ' || relowner::regrole::text
           || ' acl ' || coalesce(relacl::text, '-')
           || ' comment ' || coalesce(pg_catalog.obj_description(oid, 'pg_class'), '-') AS line
      FROM rel
    UNION ALL
    SELECT 'column ' || r.relname || '.' || a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text
           || ' default ' || coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '-')
           || ' collation ' || coalesce(a.attcollation::regcollation::text, '-')
           || ' acl ' || coalesce(a.attacl::text, '-')
           || ' comment ' || coalesce(pg_catalog.col_description(r.oid, a.attnum), '-')
      FROM rel r
      JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
     WHERE r.relkind IN ('r', 'p', 'v', 'c')
    UNION ALL
    SELECT 'index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
      FROM pg_catalog.pg_index i JOIN rel r ON r.oid = i.indexrelid
    UNION ALL
    SELECT 'constraint ' || coalesce(r.relname, t.typname) || '.' || k.conname || ' '
           || pg_catalog.pg_get_constraintdef(k.oid)
           || CASE WHEN k.condeferrable THEN ' deferrable' ELSE '' END
      FROM pg_catalog.pg_constraint k
      LEFT JOIN rel r ON r.oid = k.conrelid
      LEFT JOIN pg_catalog.pg_type t ON t.oid = k.contypid
     WHERE k.connamespace = 'idem'::regnamespace
       AND k.conname NOT IN ('schema_migrations_pkey', 'schema_objects_pkey')
    UNION ALL
    SELECT 'type ' || t.typname || ' kind ' || t.typtype::text
           || ' base ' || CASE WHEN t.typtype = 'd' THEN pg_catalog.format_type(t.typbasetype, t.typtypmod) ELSE '-' END
           || ' not null ' || t.typnotnull::text || ' default ' || coalesce(t.typdefault, '-')
           || ' owner ' || t.typowner::regrole::text || ' acl ' || coalesce(t.typacl::text, '-')
           || ' comment ' || coalesce(pg_catalog.obj_description(t.oid, 'pg_type'), '-')
      FROM pg_catalog.pg_type t
     WHERE t.typnamespace = 'idem'::regnamespace AND t.typtype IN ('d', 'c', 'e')
       AND t.typname NOT LIKE '\_%'
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text || E'\n' || pg_catalog.pg_get_functiondef(p.oid)
           || E'\nowner ' || p.proowner::regrole::text || ' acl ' || coalesce(p.proacl::text, '-')
           || E'\ncomment ' || coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '-')
      FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'idem'::regnamespace
    UNION ALL
    SELECT 'view ' || r.relname || E'\n' || pg_catalog.pg_get_viewdef(r.oid)
      FROM rel r WHERE r.relkind = 'v'
    UNION ALL
    SELECT 'trigger ' || pg_catalog.pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
           || ' comment ' || coalesce(pg_catalog.obj_description(t.oid, 'pg_trigger'), '-')
      FROM pg_catalog.pg_trigger t JOIN rel r ON r.oid = t.tgrelid
     WHERE NOT t.tgisinternal
    UNION ALL
    SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || pg_catalog.format_type(s.seqtypid, NULL)
           || ' start ' || s.seqstart || ' increment ' || s.seqincrement || ' cache ' || s.seqcache
           || ' cycle ' || s.seqcycle::text
      FROM pg_catalog.pg_sequence s JOIN rel r ON r.oid = s.seqrelid
    UNION ALL
    SELECT 'schema idem owner ' || n.nspowner::regrole::text || ' acl ' || coalesce(n.nspacl::text, '-')
           || ' comment ' || coalesce(pg_catalog.obj_description(n.oid, 'pg_namespace'), '-')
      FROM pg_catalog.pg_namespace n WHERE n.nspname = 'idem'
) AS everything
ORDER BY line
)SQL";

}  // namespace

std::string schemaCatalog(pqxx::connection& connection) {
  pqxx::nontransaction tx(connection);
  std::string out;
  for (const auto& row : tx.exec(kCatalog)) {
    out += row[0].c_str();
    out += '\n';
  }
  // The rows the schema itself writes: the declared business types (less the moment they were
  // declared).
  if (!tx.exec1("SELECT to_regclass('idem.business_types') IS NULL")[0].as<bool>()) {
    for (const auto& row : tx.exec("SELECT 'business type ' || (to_jsonb(b) - 'declared_at')::text "
                                   "FROM idem.business_types b ORDER BY 1")) {
      out += row[0].c_str();
      out += '\n';
    }
  }
  return out;
}

}  // namespace idem::test

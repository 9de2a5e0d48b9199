#include "test_database.hpp"

#include <QCoreApplication>
#include <QTest>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "pg_cluster.hpp"

namespace idem::test {
namespace {

std::unique_ptr<PgCluster>& clusterSlot() {
  static std::unique_ptr<PgCluster> cluster;
  return cluster;
}

}  // namespace

PgCluster* TestDatabase::privateCluster() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("IDEMWATCH_TEST_DSN");
    if (env == nullptr || *env == '\0') clusterSlot() = std::make_unique<PgCluster>();
  });
  return clusterSlot().get();
}

std::string TestDatabase::serverDsn() {
  if (PgCluster* c = privateCluster()) return c->dsn().toStdString();
  return std::string(std::getenv("IDEMWATCH_TEST_DSN")) + " dbname=postgres";
}

std::string TestDatabase::isolationLevel() {
  const char* env = std::getenv("IDEMWATCH_TEST_ISOLATION");
  return env == nullptr || *env == '\0' ? std::string("read committed") : std::string(env);
}

namespace {

// A suite run at another level gets databases (and so login roles) of its own: the variants of one
// suite run side by side under ctest -j.
std::string nameAtLevel(const std::string& name) {
  const std::string level = TestDatabase::isolationLevel();
  if (level == "read committed") return name;
  if (level == "repeatable read") return name + "_rr";
  if (level == "serializable") return name + "_ser";
  throw std::invalid_argument(
      "IDEMWATCH_TEST_ISOLATION must be read committed, repeatable read "
      "or serializable, not '" +
      level + "'");
}

}  // namespace

TestDatabase::TestDatabase(const std::string& name, bool migrate)
    : name_(nameAtLevel(name)), migrate_(migrate) {
  create();
}

TestDatabase::~TestDatabase() {
  try {
    pqxx::connection c(serverDsn());
    pqxx::nontransaction tx(c);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
    // The roles outlive databases: once theirs is gone, nothing holds them.
    for (const std::string& role : logins_) tx.exec("DROP ROLE IF EXISTS " + tx.quote_name(role));
  } catch (...) {  // the cluster may already be gone; nothing to clean then
  }
}

void TestDatabase::create() {
  {
    pqxx::connection c(serverDsn());
    pqxx::nontransaction tx(c);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
    tx.exec("CREATE DATABASE " + tx.quote_name(name_));
  }
  pqxx::connection c(dsn());
  {
    pqxx::nontransaction tx(c);
    tx.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  }
  if (migrate_) idem::migrate(c, idem::bundledMigrations());
  if (const std::string level = isolationLevel(); level != "read committed") {
    // Every transaction of every login in this database, as a driver or an ORM that opens its
    // transactions at this level would run them.
    pqxx::nontransaction tx(c);
    std::string alter = "ALTER DATABASE ";
    alter += tx.quote_name(name_);
    alter += " SET default_transaction_isolation = ";
    alter += tx.quote(level);
    tx.exec(alter);
  }
}

void TestDatabase::reset() {
  create();
}

std::string TestDatabase::dsn() const {
  return serverDsn() + " dbname=" + name_;
}

std::string TestDatabase::dsnAs(const std::string& user) const {
  return dsn() + " user=" + user;
}

std::unique_ptr<pqxx::connection> TestDatabase::connect() const {
  return std::make_unique<pqxx::connection>(dsn());
}

std::string TestDatabase::createLoginRole(const std::string& base, const std::string& groupRole) {
  const std::string role = base + "_" + name_;
  pqxx::connection c(dsn());
  pqxx::nontransaction tx(c);
  // The role name travels as a parameter and the statements are appended piece by piece:
  // libpqxx's inline quote() and "literal" + string trip GCC 12's false -Wrestrict at -O3.
  if (tx.exec_params("SELECT 1 FROM pg_roles WHERE rolname = $1", role).empty()) {
    std::string create = "CREATE ROLE ";
    create += tx.quote_name(role);
    create += " LOGIN";
    tx.exec(create);
  }
  if (!groupRole.empty()) {
    std::string grant = "GRANT ";
    grant += tx.quote_name(groupRole);
    grant += " TO ";
    grant += tx.quote_name(role);
    tx.exec(grant);
  }
  if (std::find(logins_.begin(), logins_.end(), role) == logins_.end()) logins_.push_back(role);
  return role;
}

void TestDatabase::exec(const std::string& sql) const {
  pqxx::connection c(dsn());
  pqxx::nontransaction tx(c);
  tx.exec(sql);
}

void TestDatabase::makeHistoryDays(int oldest, int newest) const {
  pqxx::connection c(dsn());
  pqxx::nontransaction tx(c);
  const pqxx::result statements = tx.exec_params(
      "SELECT format('CREATE TABLE idem.%I PARTITION OF idem.%I FOR VALUES FROM (%L) TO (%L)', "
      "              t || '_p' || to_char(g::date, 'YYYYMMDD'), t, "
      "              g::date::timestamp AT TIME ZONE 'UTC', "
      "              (g::date + 1)::timestamp AT TIME ZONE 'UTC') "
      "  FROM unnest(ARRAY['attempts', 'transitions']) AS t, "
      "       generate_series((now() AT TIME ZONE 'UTC')::date - $1::int, "
      "                       (now() AT TIME ZONE 'UTC')::date - $2::int, interval '1 day') AS g",
      oldest, newest);
  for (const pqxx::row& statement : statements) tx.exec(statement[0].c_str());
}

long long TestDatabase::scalar(const std::string& sql) const {
  pqxx::connection c(dsn());
  pqxx::nontransaction tx(c);
  const pqxx::result r = tx.exec(sql);
  if (r.empty() || r[0][0].is_null()) return 0;
  return r[0][0].as<long long>();
}

void TestDatabase::expectNone(std::initializer_list<const char*> counts) const {
  for (const char* count : counts) {
    const long long n = scalar(count);
    QVERIFY2(n == 0, (std::to_string(n) + " rows of " + count).c_str());
  }
}

std::string sqlstateOf(pqxx::connection& c, const std::string& sql) {
  try {
    translatingErrors("as role", [&] {
      pqxx::nontransaction tx(c);
      tx.exec(sql);
    });
    return "";
  } catch (const DatabaseError& e) {
    return e.sqlstate();
  }
}

}  // namespace idem::test

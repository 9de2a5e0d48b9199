// The one throwaway-PostgreSQL fixture every suite shares. scripts/test starts a cluster and sets
// IDEMWATCH_TEST_DSN; run by hand without it, the fixture starts a private cluster for the process.
// Each suite gets a fresh, migrated database of its own, so suites can run in parallel.
#pragma once

#include <QString>
#include <initializer_list>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace idem::test {

class PgCluster;

class TestDatabase {
 public:
  // The isolation level every transaction of the suite's databases runs at, from
  // IDEMWATCH_TEST_ISOLATION (read committed, repeatable read or serializable; default read
  // committed). At another level than read committed the database's name gets a suffix and the
  // database the level as its default_transaction_isolation.
  static std::string isolationLevel();

  // Creates database `name` (dropping a leftover one) and applies the bundled migrations.
  explicit TestDatabase(const std::string& name, bool migrate = true);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& name() const { return name_; }
  // Superuser DSN for this database.
  std::string dsn() const;
  // DSN for this database as another login role.
  std::string dsnAs(const std::string& user) const;
  std::unique_ptr<pqxx::connection> connect() const;

  // A LOGIN role unique to this database, member of the given group role (e.g. idem_operator),
  // dropped with the database.
  std::string createLoginRole(const std::string& base, const std::string& groupRole);

  void exec(const std::string& sql) const;
  long long scalar(const std::string& sql) const;
  // The history's day partitions (attempts and transitions) for the UTC days from `oldest` to
  // `newest` days back, made as idem.prepare_history_partitions makes the days ahead.
  void makeHistoryDays(int oldest, int newest) const;
  // Each of `counts` (a SELECT count(*) of the rows that would break a law the suite pins down)
  // is 0; a failure names the first that is not.
  void expectNone(std::initializer_list<const char*> counts) const;

  // Drops and recreates the database (migrated again): a clean slate between test functions.
  void reset();

  // The private cluster when IDEMWATCH_TEST_DSN is not set (null otherwise).
  static PgCluster* privateCluster();
  // DSN of the maintenance database (postgres) of the cluster in use.
  static std::string serverDsn();

 private:
  void create();
  std::string name_;
  bool migrate_;
  std::vector<std::string> logins_;  // createLoginRole's, dropped by the destructor
};

// The SQLSTATE of running sql on c (empty when it succeeds): how the suites see what the database
// refuses, whoever asks.
std::string sqlstateOf(pqxx::connection& c, const std::string& sql);

}  // namespace idem::test

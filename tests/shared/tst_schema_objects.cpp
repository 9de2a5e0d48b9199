// The schema as it is today: the functions, views and triggers of sql/objects/, re-applied by
// migrate when their text changes, and the baseline an empty database is installed from. Every
// path a database can take ends in the same catalog: the released migrations alone, the baseline
// with the objects, and upgrades from earlier versions.
#include <QtTest>
#include <chrono>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <sstream>

#include "idem/database_error.hpp"
#include "idem/migrations.hpp"
#include "schema_catalog.hpp"
#include "test_database.hpp"

using namespace idem;

namespace {

// The object a file's statement creates, by its kind: "functions/is_blank.sql" defines
// idem.is_blank, "views/x.sql" idem.x, "triggers/x.sql" the trigger x.
std::string definedName(const SchemaObject& o) {
  static const std::regex function(R"(CREATE OR REPLACE FUNCTION idem\.(\w+)\()");
  static const std::regex view(R"(CREATE OR REPLACE VIEW idem\.(\w+) AS)");
  static const std::regex trigger(R"(CREATE OR REPLACE TRIGGER (\w+)\n)");
  static const std::regex domain(R"(ALTER DOMAIN idem\.(\w+) ADD CONSTRAINT)");
  const std::regex& pattern = o.name.starts_with("functions/") ? function
                              : o.name.starts_with("views/")   ? view
                              : o.name.starts_with("domains/") ? domain
                                                               : trigger;
  std::smatch m;
  return std::regex_search(o.sql, m, pattern) ? m[1].str() : "<none>";
}

// "" when the two catalogs are the same; else the first lines that differ, side by side.
std::string difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb, out;
  int shown = 0;
  while (shown < 6 && (std::getline(sa, la) ? 1 : 0) + (std::getline(sb, lb) ? 1 : 0) > 0) {
    if (la != lb) {
      out += "\n  - " + la + "\n  + " + lb;
      ++shown;
    }
    la.clear();
    lb.clear();
  }
  return out;
}

#define QCOMPARE_CATALOG(actual, expected)                                  \
  do {                                                                      \
    const std::string d = difference(actual, expected);                     \
    QVERIFY2(d.empty(), ("the catalogs differ, first lines:" + d).c_str()); \
  } while (false)

std::string stem(const std::string& path) {
  return path.substr(path.find('/') + 1, path.size() - path.find('/') - 1 - 4);
}

}  // namespace

class TestSchemaObjects : public QObject {
  Q_OBJECT

  std::unique_ptr<test::TestDatabase> db_;

  std::unique_ptr<test::TestDatabase> emptyDatabase(const std::string& suffix) {
    return std::make_unique<test::TestDatabase>("tst_schema_objects_" + suffix, false);
  }

  std::string scalarText(pqxx::connection& c, const std::string& sql) {
    pqxx::nontransaction tx(c);
    const pqxx::row row = tx.exec1(sql);
    return row[0].is_null() ? "<null>" : row[0].c_str();
  }

 private slots:
  void init() { db_ = emptyDatabase("main"); }
  void cleanup() { db_.reset(); }

  // The baseline and the objects make, in one step, the very schema the released migrations make
  // one by one; with or without the objects re-applied on top, to the owner, grant and comment.
  void theBaselineAndTheMigrationsEndInTheSameSchema() {
    auto c = db_->connect();
    const MigrationReport fresh = migrate(*c, bundledMigrations());
    QCOMPARE(QString::fromStdString(fresh.baseline),
             QString::fromStdString(bundledBaseline().tablesName));
    QCOMPARE(fresh.applied.size(), bundledMigrations().size());
    const std::string viaBaseline = test::schemaCatalog(*c);

    // The released path: every numbered migration, one by one, then the objects as they are
    // today (they may have moved on since the newest migration; migrate brings them along).
    auto released = emptyDatabase("released");
    auto r = released->connect();
    MigrateOptions throughTheMigrations;
    throughTheMigrations.baseline = nullptr;
    const MigrationReport old = migrate(*r, bundledMigrations(), throughTheMigrations);
    QVERIFY(old.baseline.empty());
    QCOMPARE(old.applied.size(), bundledMigrations().size());
    QCOMPARE_CATALOG(test::schemaCatalog(*r), viaBaseline);

    // Run again, nothing is re-applied and nothing changes.
    const MigrationReport again = migrate(*r, bundledMigrations(), throughTheMigrations);
    QCOMPARE(again.reapplied.size(), std::size_t{0});
    QCOMPARE(again.objectsUnchanged, static_cast<int>(bundledObjects().objects.size()));
    QCOMPARE_CATALOG(test::schemaCatalog(*r), viaBaseline);
    QVERIFY(viaBaseline.find("function idem.begin(") != std::string::npos);
  }

  // A database of an earlier version upgrades through the numbered migrations, then takes the
  // objects: the same schema as a new one.
  void upgradesFromEarlierVersionsEndInTheSameSchema() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string fresh = test::schemaCatalog(*c);
    for (int from : {5, 9, 13}) {
      auto old = emptyDatabase("from_" + std::to_string(from));
      auto o = old->connect();
      const MigrationReport partial =
          migrate(*o, bundledMigrations(), MigrateOptions{.upTo = from});
      QVERIFY(partial.baseline.empty());
      QVERIFY2(partial.reapplied.empty(), "objects applied below their version");
      QCOMPARE(scalarText(*o, "SELECT to_regclass('idem.schema_objects')::text"),
               std::string("<null>"));
      const MigrationReport rest = migrate(*o, bundledMigrations());
      QCOMPARE(rest.applied.size(), bundledMigrations().size() - static_cast<std::size_t>(from));
      QCOMPARE(rest.reapplied.size(), bundledObjects().objects.size());
      QCOMPARE_CATALOG(test::schemaCatalog(*o), fresh);
    }
  }

  // Nothing changed, nothing re-applied; and the run that finds nothing to do is quick.
  void unchangedObjectsAreLeftAlone() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string appliedAt =
        scalarText(*c, "SELECT max(applied_at)::text FROM idem.schema_objects");
    const auto begin = std::chrono::steady_clock::now();
    const MigrationReport again = migrate(*c, bundledMigrations());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    qInfo("migrate with nothing to do: %.1f ms", ms);
    QVERIFY(again.applied.empty());
    QVERIFY(again.reapplied.empty());
    QCOMPARE(again.objectsUnchanged, static_cast<int>(bundledObjects().objects.size()));
    QCOMPARE(scalarText(*c, "SELECT max(applied_at)::text FROM idem.schema_objects"), appliedAt);
  }

  // Editing an object's file is how the live definition changes: the next migrate re-applies that
  // file alone, reports it, and records its new text.
  void aChangedObjectIsReappliedAndReported() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    SchemaObjects edited = bundledObjects();
    auto it = std::find_if(edited.objects.begin(), edited.objects.end(), [](const SchemaObject& o) {
      return o.name == "functions/is_blank.sql";
    });
    QVERIFY(it != edited.objects.end());
    it->sql += "\nCOMMENT ON FUNCTION idem.is_blank(text) IS 'edited';\n";
    MigrateOptions options;
    options.objects = &edited;
    const MigrationReport report = migrate(*c, bundledMigrations(), options);
    QCOMPARE(report.reapplied, std::vector<std::string>{"functions/is_blank.sql"});
    QCOMPARE(scalarText(*c, "SELECT obj_description('idem.is_blank(text)'::regprocedure)"),
             std::string("edited"));
    // Back to the tree's text: re-applied again, the comment as the file has it.
    const MigrationReport back = migrate(*c, bundledMigrations());
    QCOMPARE(back.reapplied, std::vector<std::string>{"functions/is_blank.sql"});
    QVERIFY(scalarText(*c, "SELECT obj_description('idem.is_blank(text)'::regprocedure)") !=
            "edited");
  }

  // A value added to a vocabulary reaches its domain on the next migrate, without a scan of the
  // rows (NOT VALID); a check whose values are already the file's is left as it is, VALID or not.
  void aVocabularyValueReachesItsDomain() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string checkOid =
        "SELECT oid::text FROM pg_constraint WHERE conname = 'trigger_source_valid'";
    const std::string before = scalarText(*c, checkOid);
    SchemaObjects edited = bundledObjects();
    auto it = std::find_if(edited.objects.begin(), edited.objects.end(), [](const SchemaObject& o) {
      return o.name == "domains/trigger_source.sql";
    });
    QVERIFY(it != edited.objects.end());
    const std::size_t at = it->sql.find("'callback']");
    QVERIFY(at != std::string::npos);
    it->sql.replace(at, 11, "'callback', 'scheduler']");
    const std::size_t check = it->sql.find("'callback'))");
    QVERIFY(check != std::string::npos);
    it->sql.replace(check, 12, "'callback', 'scheduler'))");
    MigrateOptions options;
    options.objects = &edited;
    const MigrationReport report = migrate(*c, bundledMigrations(), options);
    QCOMPARE(report.reapplied, std::vector<std::string>{"domains/trigger_source.sql"});
    QCOMPARE(scalarText(*c, "SELECT 'scheduler'::idem.trigger_source::text"),
             std::string("scheduler"));
    QVERIFY(scalarText(*c, checkOid) != before);
    QCOMPARE(scalarText(*c,
                        "SELECT convalidated::text FROM pg_constraint WHERE conname = "
                        "'trigger_source_valid'"),
             std::string("false"));
    // Back to the tree's table: the value is refused again.
    migrate(*c, bundledMigrations());
    pqxx::nontransaction tx(*c);
    QVERIFY_THROWS_EXCEPTION(pqxx::check_violation,
                             tx.exec("SELECT 'scheduler'::idem.trigger_source"));
  }

  // An object that fails names its file, and the run keeps nothing: not the object before it,
  // not its record.
  void aFailingObjectChangesNothing() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    const std::string before = test::schemaCatalog(*c);
    const std::string recorded =
        scalarText(*c,
                   "SELECT string_agg(name || checksum, ',' ORDER BY name) FROM "
                   "idem.schema_objects");
    SchemaObjects broken = bundledObjects();
    broken.objects.front().sql += "\nCOMMENT ON FUNCTION idem.is_blank(text) IS 'half';\n";
    broken.objects.back().sql = "CREATE OR REPLACE TRIGGER nothing_here ON idem.no_such_table;";
    MigrateOptions options;
    options.objects = &broken;
    try {
      migrate(*c, bundledMigrations(), options);
      QFAIL("a broken object was applied");
    } catch (const DatabaseError& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(
                   QString::fromStdString("sql/objects/" + broken.objects.back().name)),
               e.what());
    }
    QCOMPARE_CATALOG(test::schemaCatalog(*c), before);
    QCOMPARE(scalarText(*c,
                        "SELECT string_agg(name || checksum, ',' ORDER BY name) FROM "
                        "idem.schema_objects"),
             recorded);
  }

  // A function new in an object file is idem_owner's, executable by nobody else unless the
  // contract's role table names it; the run's grant check passes.
  void aNewFunctionTakesItsOwnerAndGrantsFromTheRoleTable() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    SchemaObjects more = bundledObjects();
    more.objects.insert(more.objects.begin(),
                        {"functions/probe_answer.sql",
                         "CREATE OR REPLACE FUNCTION idem.probe_answer() RETURNS integer "
                         "LANGUAGE sql AS 'SELECT 42';"});
    MigrateOptions options;
    options.objects = &more;
    const MigrationReport report = migrate(*c, bundledMigrations(), options);
    QCOMPARE(report.reapplied, std::vector<std::string>{"functions/probe_answer.sql"});
    QCOMPARE(scalarText(*c,
                        "SELECT proowner::regrole::text FROM pg_proc WHERE proname = "
                        "'probe_answer'"),
             std::string("idem_owner"));
    QCOMPARE(scalarText(*c,
                        "SELECT has_function_privilege('public', 'idem.probe_answer()', "
                        "'EXECUTE')::text"),
             std::string("false"));
    QCOMPARE(scalarText(*c,
                        "SELECT has_function_privilege('idem_writer', "
                        "'idem.begin(text, text, text, text, text, text, jsonb, interval, "
                        "text, text)', 'EXECUTE')::text"),
             std::string("true"));
  }

  // One file per object, named after it, and every function, view and trigger of the schema has
  // one: a function added by a migration alone, or a file named after something else, fails here.
  void everyObjectHasOneFileNamedAfterIt() {
    auto c = db_->connect();
    migrate(*c, bundledMigrations());
    std::set<std::string> files[3];
    std::set<std::string> domainFiles;
    for (const SchemaObject& o : bundledObjects().objects) {
      QCOMPARE(QString::fromStdString(definedName(o)), QString::fromStdString(stem(o.name)));
      if (o.name.starts_with("domains/")) {
        domainFiles.insert(stem(o.name));
        continue;
      }
      const int kind = o.name.starts_with("functions/") ? 0 : o.name.starts_with("views/") ? 1 : 2;
      files[kind].insert(stem(o.name));
    }
    // A domain's file holds its vocabulary's CHECK (generated): every such file names a domain of
    // the schema; the domains with other checks (amounts, keys) are tables' business.
    {
      pqxx::nontransaction tx(*c);
      for (const std::string& name : domainFiles) {
        QVERIFY2(
            tx.exec_params1("SELECT count(*) FROM pg_type WHERE typtype = 'd' AND typname = $1 "
                            "AND typnamespace = 'idem'::regnamespace",
                            name)[0]
                    .as<int>() == 1,
            ("sql/objects/domains/" + name + ".sql names no domain of the schema").c_str());
      }
    }
    const char* catalog[3] = {
        "SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'idem'::regnamespace",
        "SELECT relname FROM pg_class WHERE relnamespace = 'idem'::regnamespace AND relkind = 'v'",
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE "
        "c.relnamespace = 'idem'::regnamespace AND NOT t.tgisinternal"};
    for (int kind = 0; kind < 3; ++kind) {
      std::set<std::string> inDatabase;
      pqxx::nontransaction tx(*c);
      for (const auto& row : tx.exec(catalog[kind])) inDatabase.insert(row[0].c_str());
      std::string missing;
      for (const std::string& name : inDatabase)
        if (!files[kind].contains(name)) missing += " " + name;
      for (const std::string& name : files[kind])
        if (!inDatabase.contains(name)) missing += " (file only) " + name;
      QVERIFY2(missing.empty(), ("without a file of their own:" + missing).c_str());
    }
  }

  // The baseline stands for every migration and the objects are written for the newest: a
  // migration added without running scripts/make-baseline fails here.
  void theBaselineAndTheObjectsAreAtTheNewestMigration() {
    const int newest = bundledMigrations().back().version;
    QVERIFY2(bundledBaseline().version == newest,
             "sql/baseline/ is behind sql/migrations/: run scripts/make-baseline");
    QCOMPARE(bundledObjects().version, newest);
  }
};

QTEST_GUILESS_MAIN(TestSchemaObjects)
#include "tst_schema_objects.moc"

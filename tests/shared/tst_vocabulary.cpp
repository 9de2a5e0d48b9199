// Every enum that crosses the database boundary parses what it formats, refuses what it does not
// know with a message naming the value, and agrees with the CHECK constraints of the schema.
#include <QtTest>

#include "idem/vocabulary.hpp"
#include "test_database.hpp"

using namespace idem;

class TestVocabulary : public QObject {
  Q_OBJECT

  template <typename E>
  void roundTrips() {
    for (E value : allValues<E>()) {
      const auto text = format(value);
      QVERIFY2(!text.empty() && text != "?", "every value has a spelling");
      QCOMPARE(parse<E>(text), value);
      QCOMPARE(tryParse<E>(text), std::optional<E>(value));
    }
  }

 private slots:
  void everyEnumRoundTrips() {
    roundTrips<RecordStatus>();
    roundTrips<TriggerSource>();
    roundTrips<Outcome>();
    roundTrips<FundFlowKind>();
    roundTrips<ActorKind>();
    roundTrips<ResultCode>();
  }

  void spellingsMatchTheContract() {
    QCOMPARE(QString::fromStdString(spellings<RecordStatus>()),
             QStringLiteral("PROCESSING, SUCCESS, FAILED or UNKNOWN"));
    QCOMPARE(QString::fromStdString(spellings<TriggerSource>()),
             QStringLiteral("initial, llm, framework, http or callback"));
    QCOMPARE(
        QString::fromStdString(spellings<Outcome>()),
        QStringLiteral("executed, replayed, in_progress, payload_mismatch, rejected or retired"));
    QCOMPARE(QString::fromStdString(spellings<FundFlowKind>()),
             QStringLiteral("DEBIT, CREDIT, REFUND, FREEZE, UNFREEZE or CAPTURE"));
    QCOMPARE(QString::fromStdString(spellings<ActorKind>()),
             QStringLiteral("system, operator or reconciler"));
    QCOMPARE(QString::fromStdString(spellings<ResultCode>()),
             QStringLiteral("ok, conflict, invalid_transition, not_found, not_claimant, "
                            "lease_active or side_effect_recorded"));
  }

  void unknownValueNamesTheValueAndTheVocabulary() {
    QVERIFY(!tryParse<RecordStatus>("processing"));  // case matters, as in the database
    QVERIFY(!tryParse<TriggerSource>(""));
    try {
      parse<TriggerSource>("cron");
      QFAIL("parse accepted an unknown trigger source");
    } catch (const UnknownValue& e) {
      QCOMPARE(QString::fromUtf8(e.what()),
               QStringLiteral("unknown trigger source 'cron': expected initial, llm, framework, "
                              "http or callback"));
    }
  }

  void hitsAndUnsettledFollowTheContract() {
    QVERIFY(isHit(Outcome::Replayed));
    QVERIFY(isHit(Outcome::InProgress));
    QVERIFY(!isHit(Outcome::Executed));
    QVERIFY(!isHit(Outcome::PayloadMismatch));
    QVERIFY(!isHit(Outcome::Rejected));
    // v2: a retired key is a retry the layer stopped, as surely as a replay.
    QVERIFY(isHit(Outcome::Retired));
    QVERIFY(isUnsettled(RecordStatus::Processing));
    QVERIFY(isUnsettled(RecordStatus::Unknown));
    QVERIFY(!isUnsettled(RecordStatus::Success));
    QVERIFY(!isUnsettled(RecordStatus::Failed));
  }

  // The C++ vocabulary and the database's CHECK constraints must be the same sets.
  // Sizes and indexes come from the vocabulary: a table that forgets an enumerator, lists one
  // twice, out of order, or stops short is told apart from a complete one at compile time.
  void tablesAreCheckedAgainstTheEnumAtCompileTime() {
    static_assert(detail::namesEnumerator<Outcome, Outcome::Retired>());
    static_assert(!detail::namesEnumerator<Outcome, static_cast<Outcome>(kValueCount<Outcome>)>());
    static_assert(listsEveryEnumeratorInOrder(allValues<TriggerSource>()));
    static_assert(!listsEveryEnumeratorInOrder(
        std::array{TriggerSource::Initial, TriggerSource::Llm}));  // stops short
    static_assert(!listsEveryEnumeratorInOrder(
        std::array{ActorKind::System, ActorKind::Reconciler, ActorKind::Operator}));  // order
    static_assert(!listsEveryEnumeratorInOrder(
        std::array{ActorKind::System, ActorKind::System, ActorKind::Reconciler}));  // twice
    for (FundFlowKind k : allValues<FundFlowKind>()) {
      QCOMPARE(allValues<FundFlowKind>()[indexOf(k)], k);
    }
  }

  // The retry sources are every source but the first attempt, each with its own cell.
  void retrySourcesAreEverySourceButTheFirstAttempt() {
    QCOMPARE(kRetrySources.size() + 1, kValueCount<TriggerSource>);
    std::vector<bool> taken(kRetrySources.size(), false);
    for (TriggerSource s : allValues<TriggerSource>()) {
      if (isFirstAttempt(s)) {
        QCOMPARE(s, TriggerSource::Initial);
        QCOMPARE(retryIndexOf(s), kRetrySources.size());
        continue;
      }
      const std::size_t i = retryIndexOf(s);
      QVERIFY(i < kRetrySources.size());
      QCOMPARE(kRetrySources[i], s);
      QVERIFY(!taken[i]);
      taken[i] = true;
    }
  }

  void vocabularyMatchesTheSchemaConstraints() {
    test::TestDatabase db("tst_vocabulary");
    auto conn = db.connect();
    // The quoted words of a CHECK constraint's definition, as a sorted list.
    auto allowedBy = [&](const std::string& constraint) {
      pqxx::nontransaction tx(*conn);
      const auto r = tx.exec_params(
          "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1", constraint);
      if (r.empty())
        return QStringList{QStringLiteral("<no constraint ") + QString::fromStdString(constraint) +
                           ">"};
      QStringList words;
      static const QRegularExpression quoted(QStringLiteral("'([A-Za-z_]+)'"));
      for (const auto& m : quoted.globalMatch(QString::fromUtf8(r[0][0].c_str())))
        words << m.captured(1);
      words.sort();
      return words;
    };
    auto spelled = [](auto values) {
      QStringList words;
      for (auto v : values) words << QString::fromUtf8(std::string(format(v)).c_str());
      words.sort();
      return words;
    };
    QCOMPARE(allowedBy("record_status_valid"), spelled(allValues<RecordStatus>()));
    QCOMPARE(allowedBy("trigger_source_valid"), spelled(allValues<TriggerSource>()));
    QCOMPARE(allowedBy("attempt_outcome_valid"), spelled(allValues<Outcome>()));
    QCOMPARE(allowedBy("fund_flow_kind_valid"), spelled(allValues<FundFlowKind>()));
    QCOMPARE(allowedBy("actor_kind_valid"), spelled(allValues<ActorKind>()));
  }

  // The Python and TypeScript clients spell the vocabulary by hand: each of their lists holds
  // exactly the library's values (which the test above holds to the schema), in the same order.
  void clientVocabulariesMatchTheLibrary() {
    const QString root = qEnvironmentVariable("IDEMWATCH_SOURCE_DIR");
    QVERIFY2(!root.isEmpty(), "IDEMWATCH_SOURCE_DIR is not set");
    auto read = [](const QString& path) {
      QFile f(path);
      if (!f.open(QIODevice::ReadOnly)) return QStringLiteral("<cannot read ") + path + ">";
      return QString::fromUtf8(f.readAll());
    };
    const QString python = read(root + "/clients/python/idemwatch/vocabulary.py");
    const QString typescript = read(root + "/clients/typescript/src/vocabulary.ts");
    // A Python enum's values: the strings assigned in its class body, up to the next class.
    auto pythonValues = [&](const QString& enumName) {
      const qsizetype begin = python.indexOf("class " + enumName + "(");
      if (begin < 0) return QStringList{"<no class " + enumName + ">"};
      const qsizetype end = python.indexOf(QStringLiteral("\nclass "), begin + 1);
      const QString body = python.mid(begin, end < 0 ? -1 : end - begin);
      static const QRegularExpression member(QStringLiteral("^    [A-Z_]+ = \"([^\"]+)\""),
                                             QRegularExpression::MultilineOption);
      QStringList values;
      for (const auto& m : member.globalMatch(body)) values << m.captured(1);
      return values;
    };
    // A TypeScript `export const NAME = [...] as const`: its string literals.
    auto typescriptValues = [&](const QString& constName) {
      const qsizetype begin = typescript.indexOf("export const " + constName + " = [");
      if (begin < 0) return QStringList{"<no const " + constName + ">"};
      const qsizetype end = typescript.indexOf(QStringLiteral("] as const"), begin);
      const QString body = typescript.mid(begin, end - begin);
      QStringList values;
      static const QRegularExpression quoted(QStringLiteral("\"([^\"]+)\""));
      for (const QString& line : body.split('\n')) {
        const QString code = line.section(QStringLiteral("//"), 0, 0);
        for (const auto& m : quoted.globalMatch(code)) values << m.captured(1);
      }
      return values;
    };
    auto library = [](auto values) {
      QStringList words;
      for (auto v : values) words << QString::fromUtf8(std::string(format(v)).c_str());
      return words;
    };
    QCOMPARE(pythonValues("TriggerSource"), library(allValues<TriggerSource>()));
    QCOMPARE(pythonValues("Outcome"), library(allValues<Outcome>()));
    QCOMPARE(pythonValues("RecordStatus"), library(allValues<RecordStatus>()));
    QCOMPARE(pythonValues("ResultCode"), library(allValues<ResultCode>()));
    QCOMPARE(typescriptValues("TRIGGER_SOURCES"), library(allValues<TriggerSource>()));
    QCOMPARE(typescriptValues("OUTCOMES"), library(allValues<Outcome>()));
    QCOMPARE(typescriptValues("RECORD_STATUSES"), library(allValues<RecordStatus>()));
    QCOMPARE(typescriptValues("RESULT_CODES"), library(allValues<ResultCode>()));
  }
};

QTEST_GUILESS_MAIN(TestVocabulary)
#include "tst_vocabulary.moc"

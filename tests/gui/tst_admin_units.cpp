// The admin app's pure pieces, no database: how ages, money, CSV and evidence read; what is
// remembered of a connection; the backoff; that query building binds every value the operator
// types; that refreshing a keyed model in place keeps selections (under QAbstractItemModelTester);
// when a record may be settled (schema v2: a live lease waits, FAILED is only corrected, SUCCESS
// is final); how the v2 vocabulary reads (retired, reconciler) and which flows count for money;
// which request of a requester is still wanted; UTF-8 text; the palette's tones.
#include <QAbstractItemModelTester>
#include <QBuffer>
#include <QFont>
#include <QRandomGenerator>
#include <QSettings>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QtTest>

#include "models/age_text.hpp"
#include "models/attempt_model.hpp"
#include "models/bulk_settle.hpp"
#include "models/connection_profile.hpp"
#include "models/csv_writer.hpp"
#include "models/fund_flow_model.hpp"
#include "models/keyed_rows_model.hpp"
#include "models/money_text.hpp"
#include "models/overcharge_model.hpp"
#include "models/reconciliation_model.hpp"
#include "models/reconnect_backoff.hpp"
#include "models/record_page_query.hpp"
#include "models/record_table_model.hpp"
#include "models/request_tracker.hpp"
#include "models/settle_availability.hpp"
#include "models/settle_evidence.hpp"
#include "models/status_palette.hpp"
#include "models/timestamps.hpp"
#include "models/trace_story_model.hpp"
#include "models/transition_model.hpp"
#include "models/utf8_text.hpp"

using namespace idem;
using namespace idem::admin;
using namespace std::chrono_literals;

namespace {

// Rows are (key, value) pairs; the smallest model that exercises replaceRows.
struct Item {
  int key = 0;
  int value = 0;
};

class ItemModel : public KeyedRowsModel<Item, int> {
 public:
  using KeyedRowsModel::KeyedRowsModel;
  void set(std::vector<Item> items) { replaceRows(std::move(items)); }
  void append(std::vector<Item> items) { appendRows(std::move(items)); }

 protected:
  std::span<const char* const> titles() const override {
    static constexpr auto kTitles = columnTitles<2>("Key", "Value");
    return kTitles;
  }
  QVariant cellData(const Item& i, int column, int role) const override {
    if (role != Qt::DisplayRole) return {};
    return column == 0 ? i.key : i.value;
  }
  int keyOf(const Item& i) const override { return i.key; }
  bool sameContent(const Item& a, const Item& b) const override { return a.value == b.value; }
};

std::vector<int> keys(const ItemModel& m) {
  std::vector<int> out;
  for (const Item& i : m.rows()) out.push_back(i.key);
  return out;
}

}  // namespace

class TestAdminUnits : public QObject {
  Q_OBJECT

 private slots:
  void ageReadsInTwoUnitsAtMost() {
    QCOMPARE(ageText(0s), QStringLiteral("0 s"));
    QCOMPARE(ageText(-5s), QStringLiteral("0 s"));
    QCOMPARE(ageText(45s), QStringLiteral("45 s"));
    QCOMPARE(ageText(12min + 30s), QStringLiteral("12 min"));
    QCOMPARE(ageText(3h), QStringLiteral("3 h"));
    QCOMPARE(ageText(3h + 20min + 5s), QStringLiteral("3 h 20 min"));
    QCOMPARE(ageText(std::chrono::hours(52)), QStringLiteral("2 d 4 h"));
  }

  void moneyUsesTheCurrencysMinorUnit() {
    QCOMPARE(moneyText(2990, "CNY"), QStringLiteral("29.90 CNY"));
    QCOMPARE(moneyText(5, "EUR"), QStringLiteral("0.05 EUR"));
    QCOMPARE(moneyText(1500, "JPY"), QStringLiteral("1500 JPY"));
    QCOMPARE(moneyText(12345, "KWD"), QStringLiteral("12.345 KWD"));
    QCOMPARE(moneyText(-250, "USD"), QStringLiteral("-2.50 USD"));
  }

  void isoTimeKeepsMicroseconds() {
    const Timestamp t{std::chrono::microseconds(1'700'000'000'123'456)};
    QCOMPARE(isoTime(t), QStringLiteral("2023-11-14T22:13:20.123456Z"));
    const Timestamp before1970{std::chrono::microseconds(-1)};
    QCOMPARE(isoTime(before1970), QStringLiteral("1969-12-31T23:59:59.999999Z"));
  }

  void csvQuotesWhatRfc4180Requires() {
    QCOMPARE(csvField(QStringLiteral("plain")), QStringLiteral("plain"));
    QCOMPARE(csvField(QStringLiteral("a,b")), QStringLiteral("\"a,b\""));
    QCOMPARE(csvField(QStringLiteral("say \"hi\"")), QStringLiteral("\"say \"\"hi\"\"\""));
    QCOMPARE(csvField(QStringLiteral("two\nlines")), QStringLiteral("\"two\nlines\""));

    QStandardItemModel model(2, 2);
    model.setHorizontalHeaderLabels({QStringLiteral("Key"), QStringLiteral("Note, with comma")});
    model.setItem(0, 0, new QStandardItem(QStringLiteral("k'1")));
    model.setItem(0, 1, new QStandardItem(QStringLiteral("he said \"no\"")));
    model.setItem(1, 0, new QStandardItem(QStringLiteral("k2")));
    auto* exact = new QStandardItem(QStringLiteral("shown"));
    exact->setData(QStringLiteral("exact"), Qt::UserRole + 7);
    model.setItem(1, 1, exact);
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QCOMPARE(writeCsv(model, buffer, Qt::UserRole + 7), 2);
    QCOMPARE(
        QString::fromUtf8(buffer.data()),
        QStringLiteral("Key,\"Note, with comma\"\r\nk'1,\"he said \"\"no\"\"\"\r\nk2,exact\r\n"));
  }

  void evidenceIsAnObjectWithTheGatewayRef() {
    QVERIFY(!buildEvidence({}).json.has_value());
    QVERIFY(buildEvidence({}).error.isEmpty());
    QCOMPARE(QString::fromStdString(*buildEvidence({QStringLiteral(" gw-1 "), {}}).json),
             QStringLiteral(R"({"gateway_ref":"gw-1"})"));
    const auto merged = buildEvidence({QStringLiteral("gw-1"), QStringLiteral(R"({"line": 4})")});
    QCOMPARE(QString::fromStdString(*merged.json),
             QStringLiteral(R"({"gateway_ref":"gw-1","line":4})"));
    QVERIFY(buildEvidence({{}, QStringLiteral("{not json")})
                .error.contains(QStringLiteral("not valid JSON")));
    QVERIFY(buildEvidence({{}, QStringLiteral("[1, 2]")}).error.contains(QStringLiteral("object")));
    QVERIFY(!buildEvidence({QStringLiteral("gw-2"), QStringLiteral(R"({"gateway_ref": "gw-1"})")})
                 .error.isEmpty());
  }

  void profileNeverStoresAPassword() {
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("admin.ini")), QSettings::IniFormat);
    ConnectionProfile p;
    p.useDsn = true;
    p.dsn = QStringLiteral("host=db password='s3 cr\\'et' dbname=idem user=alice");
    p.save(settings);
    settings.sync();
    QFile file(dir.filePath(QStringLiteral("admin.ini")));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray stored = file.readAll();
    QVERIFY2(!stored.contains("s3"), stored.constData());
    QVERIFY(!stored.contains("password"));
    const ConnectionProfile loaded = ConnectionProfile::load(settings);
    QCOMPARE(loaded.dsn, QStringLiteral("host=db dbname=idem user=alice"));

    QCOMPARE(withoutPassword(
                 QStringLiteral("postgresql://alice:pw@db:5432/idem?sslmode=require&password=x")),
             QStringLiteral("postgresql://alice@db:5432/idem?sslmode=require"));
  }

  void profileBuildsAQuotedDsn() {
    ConnectionProfile p;
    p.host = QStringLiteral("db.internal");
    p.port = QStringLiteral("6432");
    p.dbname = QStringLiteral("idem");
    p.user = QStringLiteral("o'brien");
    QCOMPARE(
        QString::fromStdString(p.toDsn(QStringLiteral("p\\w"))),
        QStringLiteral(
            R"(host='db.internal' port='6432' dbname='idem' user='o\'brien' password='p\\w')"));
    ConnectionProfile empty;
    QCOMPARE(QString::fromStdString(empty.toDsn()), QString());  // libpq's environment decides
  }

  void backoffDoublesToItsCeiling() {
    ReconnectBackoff b(500ms, 4s);
    QCOMPARE(b.next(), 500ms);
    QCOMPARE(b.next(), 1000ms);
    QCOMPARE(b.next(), 2000ms);
    QCOMPARE(b.next(), 4000ms);
    QCOMPARE(b.next(), 4000ms);
    b.reset();
    QCOMPARE(b.next(), 500ms);
  }

  void staleRequestsAreRecognised() {
    QObject requester;
    RequestTracker tracker(&requester);
    const RequestTracker::Request first = tracker.start();
    QVERIFY(!first.isSkippable());
    tracker.cancel();
    QVERIFY(first.isSkippable());
    QVERIFY(!tracker.start().isSkippable());
    RequestTracker decisions(&requester, RequestTracker::Policy::AlwaysRun);
    const RequestTracker::Request settle = decisions.start();
    decisions.cancel();
    QVERIFY(!settle.isSkippable());
  }

  void onlyTheLatestRequestOfALiveRequesterIsDelivered() {
    auto requester = std::make_unique<QObject>();
    RequestTracker tracker(requester.get());
    const RequestTracker::Request first = tracker.start();
    const RequestTracker::Request second = tracker.start();
    QVERIFY(tracker.isRunning());
    QVERIFY(!first.finish());  // superseded
    QVERIFY(tracker.isRunning());
    QVERIFY(second.finish());
    QVERIFY(!tracker.isRunning());

    const RequestTracker::Request orphan = tracker.start();
    requester.reset();
    QVERIFY(!orphan.finish());  // nobody waits for it any more
  }

  void typedFilterTextIsAlwaysABoundParameter() {
    RecordFilter f;
    f.key = "x'); DROP TABLE idem.records; --";
    f.bizIdPrefix = R"(o'br\%_)";
    f.bizType = "payment' OR '1'='1";
    f.statuses = {RecordStatus::Processing, RecordStatus::Unknown};
    f.from = Timestamp(std::chrono::microseconds(1));
    f.within = std::chrono::seconds(60);
    const RecordCursor cursor{Timestamp(std::chrono::microseconds(5)), "cursor'key"};
    for (const BoundQuery& q :
         {pageQuery(f, cursor, 50), windowQuery(f, cursor, 50), moreAfterQuery(f, cursor)}) {
      for (const std::string& typed : {f.key, f.bizIdPrefix, f.bizType, cursor.key}) {
        QVERIFY2(q.sql.find(typed) == std::string::npos, q.sql.c_str());
        QVERIFY(std::find(q.params.begin(), q.params.end(), typed) != q.params.end());
      }
      QVERIFY(q.sql.find("OFFSET") == std::string::npos);
      QVERIFY(q.sql.find('\'' + std::string("payment")) == std::string::npos);
    }
  }

  void keysetConditionFollowsTheOrder() {
    const RecordCursor c{Timestamp(std::chrono::microseconds(7)), "k"};
    RecordFilter f;
    f.order = RecordOrder::UpdatedDesc;
    QVERIFY(pageQuery(f, c, 10).sql.find("(updated_at, idempotency_key) < (") != std::string::npos);
    QVERIFY(pageQuery(f, c, 10).sql.find("ORDER BY updated_at DESC, idempotency_key DESC") !=
            std::string::npos);
    f.order = RecordOrder::CreatedAsc;
    QVERIFY(pageQuery(f, c, 10).sql.find("(created_at, idempotency_key) > (") != std::string::npos);
    QVERIFY(windowQuery(f, c, 10).sql.find("(created_at, idempotency_key) <= (") !=
            std::string::npos);
  }

  void replaceRowsKeepsPersistentIndexesThroughRandomChanges() {
    ItemModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto* random = QRandomGenerator::global();
    int nextKey = 0;
    std::vector<Item> current;
    for (int round = 0; round < 300; ++round) {
      // Keep some rows (some with a new value), drop some, shuffle some, add some.
      std::vector<Item> next;
      for (const Item& i : current) {
        if (random->bounded(5) == 0) continue;
        next.push_back({i.key, random->bounded(3) == 0 ? i.value + 1 : i.value});
      }
      for (int k = 0; k < static_cast<int>(next.size()); ++k) {
        if (random->bounded(6) == 0)
          std::swap(next[static_cast<std::size_t>(k)],
                    next[random->bounded(static_cast<quint32>(next.size()))]);
      }
      const int added = static_cast<int>(random->bounded(6));
      for (int a = 0; a < added; ++a) {
        next.insert(next.begin() + random->bounded(static_cast<quint32>(next.size() + 1)),
                    {nextKey++, 0});
      }
      // Track one surviving row through the change.
      QPersistentModelIndex tracked;
      int trackedKey = -1;
      if (!current.empty()) {
        const int row = static_cast<int>(random->bounded(static_cast<quint32>(current.size())));
        tracked = model.index(row, 1);
        trackedKey = current[static_cast<std::size_t>(row)].key;
      }
      model.set(next);
      std::vector<int> expected;
      for (const Item& i : next) expected.push_back(i.key);
      QCOMPARE(keys(model), expected);
      for (std::size_t i = 0; i < next.size(); ++i) QCOMPARE(model.rows()[i].value, next[i].value);
      const bool survived =
          std::any_of(next.begin(), next.end(), [&](const Item& i) { return i.key == trackedKey; });
      if (trackedKey >= 0) {
        QCOMPARE(tracked.isValid(), survived);
        if (survived) QCOMPARE(model.index(tracked.row(), 0).data().toInt(), trackedKey);
      }
      current = next;
    }
  }

  // The preview follows the moves the database allows an operator (here as the contract's
  // idem.transition_allowed answers them; tst_admin_models reads them from a live schema) and adds
  // the lease, by the server's clock.
  void settleWaitsForTheLeaseCorrectsFailedAndLeavesSuccess() {
    OperatorMoves moves;
    for (RecordStatus from : {RecordStatus::Processing, RecordStatus::Unknown}) {
      moves.allow(from, RecordStatus::Success);
      moves.allow(from, RecordStatus::Failed);
    }
    moves.allow(RecordStatus::Failed, RecordStatus::Success);
    const Timestamp now{std::chrono::microseconds(1'700'000'000'000'000)};
    Record r;
    r.idempotencyKey = "pay-1";
    r.status = RecordStatus::Processing;
    r.leaseExpiresAt = now + 25s + 300ms;
    SettleAvailability a = settleAvailability(r, now, moves);
    QVERIFY(!a.allowed);
    QCOMPARE(a.leaseEndsAt, r.leaseExpiresAt);
    QVERIFY2(a.explanation.contains(displayTime(*r.leaseExpiresAt)) &&
                 a.explanation.contains(QStringLiteral("in 26 s")) &&
                 a.explanation.contains(QStringLiteral("claimant may still answer")),
             qPrintable(a.explanation));
    r.leaseExpiresAt = now + 200ms;  // rounded up: never "in 0 s" while it runs
    QVERIFY(settleAvailability(r, now, moves).explanation.contains(QStringLiteral("in 1 s")));

    r.leaseExpiresAt = now - 1s;
    a = settleAvailability(r, now, moves);
    QVERIFY(a.allowed && !a.correction && !a.leaseEndsAt);
    r.status = RecordStatus::Unknown;
    QVERIFY(settleAvailability(r, now, moves).allowed);

    r.status = RecordStatus::Failed;
    a = settleAvailability(r, now, moves);
    QVERIFY(a.allowed && a.correction);
    QVERIFY2(a.explanation.contains(QStringLiteral("from FAILED to SUCCESS")) &&
                 a.explanation.contains(QStringLiteral("happened after all")),
             qPrintable(a.explanation));
    r.status = RecordStatus::Success;
    a = settleAvailability(r, now, moves);
    QVERIFY(!a.allowed);
    QVERIFY(a.explanation.contains(QStringLiteral("final")));

    // A schema that allowed no correction: FAILED is final too, with no rule of its own here.
    OperatorMoves noCorrection = moves;
    noCorrection = OperatorMoves{};
    noCorrection.allow(RecordStatus::Unknown, RecordStatus::Success);
    r.status = RecordStatus::Failed;
    QVERIFY(!settleAvailability(r, now, noCorrection).allowed);
    QVERIFY(moves.anyFrom(RecordStatus::Failed) && !moves.anyFrom(RecordStatus::Success));
  }

  void retiredAndReconcilerReadApart() {
    AttemptModel attempts;
    QAbstractItemModelTester t1(&attempts, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto attempt = [](std::int64_t id, Outcome outcome) {
      Attempt a;
      a.id = id;
      a.outcome = outcome;
      return a;
    };
    attempts.setAttempts({attempt(1, Outcome::Retired), attempt(2, Outcome::Replayed)});
    const QModelIndex r = attempts.index(0, AttemptModel::Outcome);
    QCOMPARE(r.data().toString(), QStringLiteral("retired"));
    QCOMPARE(r.data(Qt::ForegroundRole).value<QBrush>().color(),
             outcomeForeground(Outcome::Retired));
    QVERIFY(r.data(Qt::ToolTipRole).toString().contains(QStringLiteral("retention")));
    QVERIFY(!attempts.index(1, AttemptModel::Outcome).data(Qt::ForegroundRole).isValid());

    TransitionModel transitions;
    QAbstractItemModelTester t2(&transitions,
                                QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto transitionBy = [](std::int64_t id, ActorKind kind) {
      Transition t;
      t.id = id;
      t.actorKind = kind;
      return t;
    };
    transitions.setTransitions({transitionBy(1, ActorKind::System),
                                transitionBy(2, ActorKind::Reconciler),
                                transitionBy(3, ActorKind::Operator)});
    const QModelIndex kind = transitions.index(1, TransitionModel::ActorKind);
    QCOMPARE(kind.data().toString(), QStringLiteral("reconciler"));
    QVERIFY(kind.data(Qt::FontRole).value<QFont>().italic());
    QVERIFY(!kind.data(Qt::FontRole).value<QFont>().bold());
    QCOMPARE(kind.data(Qt::ForegroundRole).value<QBrush>().color(),
             actorKindForeground(ActorKind::Reconciler));
    QVERIFY(kind.data(Qt::ToolTipRole).toString().contains(QStringLiteral("idem.reconcile")));
    QCOMPARE(kind.data(TransitionModel::ActorKindRole).toInt(),
             static_cast<int>(ActorKind::Reconciler));
    QVERIFY(
        transitions.index(2, TransitionModel::ActorKind).data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!transitions.index(0, TransitionModel::ActorKind).data(Qt::FontRole).isValid());
    QVERIFY(actorKindForeground(ActorKind::Reconciler) != actorKindForeground(ActorKind::Operator));
  }

  // What counts is the flow's role as the database reads its business type, never its kind: a
  // payout's CREDIT proves its side effect, a coupon's DEBIT (a type whose effect leaves no line)
  // does not.
  void theFlowsThatCountForTheSideEffectAreMarked() {
    FundFlowModel flows;
    QAbstractItemModelTester t(&flows, QAbstractItemModelTester::FailureReportingMode::QtTest);
    struct Line {
      const char* bizType;
      FundFlowKind kind;
      SideEffectRole role;
    };
    const std::vector<Line> lines{
        {"payment", FundFlowKind::Debit, SideEffectRole::Effect},
        {"payment", FundFlowKind::Refund, SideEffectRole::Reversal},
        {"payment", FundFlowKind::Freeze, SideEffectRole::None},
        {"payout", FundFlowKind::Credit, SideEffectRole::Effect},
        {"coupon", FundFlowKind::Debit, SideEffectRole::None},
    };
    std::vector<FundFlow> rows;
    for (const Line& line : lines) {
      FundFlow f;
      f.id = static_cast<std::int64_t>(rows.size()) + 1;
      f.bizType = line.bizType;
      f.kind = line.kind;
      f.role = line.role;
      rows.push_back(f);
    }
    flows.setFlows(rows);
    // Unmarked (the detail pane): every flow looks alike.
    QVERIFY(!flows.index(2, FundFlowModel::Kind).data(Qt::ForegroundRole).isValid());
    QSignalSpy changed(&flows, &QAbstractItemModel::dataChanged);
    flows.setMarkingMoneyMovement(true);
    QCOMPARE(changed.count(), 1);
    for (int row = 0; row < flows.rowCount(); ++row) {
      const QModelIndex i = flows.index(row, FundFlowModel::Kind);
      const bool counts = lines[static_cast<std::size_t>(row)].role != SideEffectRole::None;
      QCOMPARE(i.data(FundFlowModel::MovesMoneyRole).toBool(), counts);
      QCOMPARE(i.data(Qt::FontRole).value<QFont>().bold(), counts);
      QCOMPARE(i.data(Qt::ForegroundRole).isValid(), !counts);
      QCOMPARE(i.data(Qt::ToolTipRole).toString().contains(QStringLiteral("does not count")),
               !counts);
    }
    QVERIFY(flows.index(3, FundFlowModel::Kind)
                .data(Qt::ToolTipRole)
                .toString()
                .contains(QStringLiteral("proves the payout's side effect")));
  }

  void appendSkipsRowsAlreadyShown() {
    ItemModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.append({{1, 0}, {2, 0}});
    model.append({{2, 5}, {3, 0}});
    QCOMPARE(keys(model), (std::vector<int>{1, 2, 3}));
  }

  void utf8TextKeepsEveryByteOfTheView() {
    const std::string stored = "caf\xC3\xA9 \xE2\x82\xAC 5";  // café € 5
    QCOMPARE(fromUtf8(stored), QStringLiteral("caf\u00E9 \u20AC 5"));
    // A view into the middle of a buffer: no terminating NUL, and it ends where the view ends.
    const std::string_view middle = std::string_view(stored).substr(3, 2);
    QCOMPARE(fromUtf8(middle), QStringLiteral("\u00E9"));
    QCOMPARE(fromUtf8(std::string_view("a\0b", 3)).size(), 3);
    QVERIFY(fromUtf8({}).isEmpty());
  }

  void headersNameEveryColumnInOrder() {
    AttemptModel attempts;
    QCOMPARE(attempts.headerData(AttemptModel::When, Qt::Horizontal).toString(),
             QStringLiteral("When"));
    QCOMPARE(attempts.headerData(AttemptModel::RequestHash, Qt::Horizontal).toString(),
             QStringLiteral("Request hash"));
    TransitionModel transitions;
    QCOMPARE(transitions.headerData(TransitionModel::ActorKind, Qt::Horizontal).toString(),
             QStringLiteral("Kind"));
    FundFlowModel flows;
    QCOMPARE(flows.headerData(FundFlowModel::Id, Qt::Horizontal).toString(),
             QStringLiteral("Flow"));
    TraceStoryModel story;
    QCOMPARE(story.headerData(TraceStoryModel::FromTo, Qt::Horizontal).toString(),
             QStringLiteral("From \u2192 to"));
    QCOMPARE(story.columnCount(), static_cast<int>(TraceStoryModel::ColumnCount));
    story.setEvents({StoryEvent{}});
    QCOMPARE(story.columnCount(story.index(0, 0)), 0);  // a table: rows have no children
    ReconciliationModel reconciliation;
    QCOMPARE(reconciliation.headerData(ReconciliationModel::At, Qt::Horizontal).toString(),
             QStringLiteral("Charged / succeeded at"));
    OverchargeModel overcharges;
    BulkResultModel results;
    QCOMPARE(results.headerData(BulkResultModel::Message, Qt::Horizontal).toString(),
             QStringLiteral("Message"));
    // The records table adds tooltips to three of its titles.
    RecordTableModel records(nullptr);
    QCOMPARE(records.columnCount(), static_cast<int>(RecordTableModel::ColumnCount));
    QCOMPARE(records.headerData(RecordTableModel::Key, Qt::Horizontal).toString(),
             QStringLiteral("Idempotency key"));
    QVERIFY(records.headerData(RecordTableModel::Age, Qt::Horizontal, Qt::ToolTipRole)
                .toString()
                .contains(QStringLiteral("updated_at")));
    QVERIFY(
        !records.headerData(RecordTableModel::Status, Qt::Horizontal, Qt::ToolTipRole).isValid());
    QVERIFY(!records.headerData(RecordTableModel::Age, Qt::Vertical, Qt::ToolTipRole).isValid());
    QVERIFY(!records.headerData(RecordTableModel::Age, Qt::Vertical).isValid());
    QVERIFY(!records.headerData(RecordTableModel::ColumnCount, Qt::Horizontal).isValid());
    for (QAbstractItemModel* m : std::initializer_list<QAbstractItemModel*>{
             &attempts, &transitions, &flows, &story, &reconciliation, &overcharges, &results}) {
      for (int c = 0; c < m->columnCount(); ++c) {
        QVERIFY(!m->headerData(c, Qt::Horizontal).toString().isEmpty());
        QVERIFY(!m->headerData(c, Qt::Vertical).isValid());
        QVERIFY(!m->headerData(c, Qt::Horizontal, Qt::ToolTipRole).isValid());
      }
      QVERIFY(!m->headerData(m->columnCount(), Qt::Horizontal).isValid());
      QVERIFY(!m->headerData(-1, Qt::Horizontal).isValid());
    }
  }

  void traceStoryShowsEachKindOfEventFromItsTypedValues() {
    TraceStoryModel model;
    QAbstractItemModelTester t(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    StoryEvent attempt;
    attempt.eventId = 7;
    attempt.key = "pay-1";
    attempt.source = TriggerSource::Llm;
    attempt.outcome = Outcome::PayloadMismatch;
    StoryEvent created;
    created.kind = StoryEventKind::Transition;
    created.eventId = 7;  // an attempt's id and a transition's id may be equal
    created.toStatus = RecordStatus::Processing;
    created.actor = "alice";
    created.actorKind = ActorKind::Operator;
    StoryEvent expiry = created;
    expiry.kind = StoryEventKind::LeaseExpiry;
    expiry.eventId = 8;
    expiry.fromStatus = RecordStatus::Processing;
    expiry.toStatus = RecordStatus::Unknown;
    expiry.actorKind.reset();
    expiry.reason = "lease expired";
    StoryEvent flow;
    flow.kind = StoryEventKind::FundFlow;
    flow.eventId = 7;
    flow.flowKind = FundFlowKind::Freeze;
    model.setEvents({attempt, created, expiry, flow});
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(attempt.identity(), std::string("attempt#7"));
    QCOMPARE(expiry.identity(), std::string("transition#8"));
    QCOMPARE(flow.identity(), std::string("fund_flow#7"));

    const auto cell = [&](int row, int column) {
      return model.index(row, column).data().toString();
    };
    const auto colour = [&](int row, int column) {
      return model.index(row, column).data(Qt::ForegroundRole).value<QBrush>().color();
    };
    QCOMPARE(cell(0, TraceStoryModel::Event), QStringLiteral("attempt"));
    QCOMPARE(cell(0, TraceStoryModel::Source), QStringLiteral("llm"));
    QCOMPARE(cell(0, TraceStoryModel::Outcome), QStringLiteral("payload_mismatch"));
    QCOMPARE(colour(0, TraceStoryModel::Outcome), outcomeForeground(Outcome::PayloadMismatch));
    QVERIFY(cell(0, TraceStoryModel::FromTo).isEmpty() &&
            cell(0, TraceStoryModel::Actor).isEmpty());
    QCOMPARE(cell(1, TraceStoryModel::FromTo), QStringLiteral("(new) \u2192 PROCESSING"));
    QCOMPARE(cell(1, TraceStoryModel::Actor), QStringLiteral("alice (operator)"));
    // The lease expiry is the transition the database recorded.
    QCOMPARE(cell(2, TraceStoryModel::Event), QStringLiteral("transition"));
    QCOMPARE(model.index(2, 0).data(TraceStoryModel::EventRole).toString(),
             QStringLiteral("transition"));
    QVERIFY(model.index(2, TraceStoryModel::Event).data(Qt::FontRole).value<QFont>().italic());
    QCOMPARE(cell(2, TraceStoryModel::FromTo), QStringLiteral("PROCESSING \u2192 UNKNOWN"));
    QCOMPARE(cell(2, TraceStoryModel::Actor), QStringLiteral("alice"));
    QCOMPARE(cell(2, TraceStoryModel::Reason), QStringLiteral("lease expired"));
    QCOMPARE(colour(2, TraceStoryModel::FromTo), statusForeground(RecordStatus::Unknown));
    // A flow without an amount or a gateway reference: its kind alone, no tooltip.
    QCOMPARE(cell(3, TraceStoryModel::Event), QStringLiteral("fund_flow"));
    QCOMPARE(cell(3, TraceStoryModel::Flow), QStringLiteral("FREEZE"));
    QVERIFY(!model.index(3, TraceStoryModel::Flow).data(Qt::ToolTipRole).isValid());
    QVERIFY(model.index(3, TraceStoryModel::Event).data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!model.index(0, TraceStoryModel::Event).data(Qt::FontRole).isValid());
    QVERIFY(model.index(3, 0).data(TraceStoryModel::BizTypeRole).toString().isEmpty());
  }

  void tonesThatMeanAStatusWearItsColour() {
    QCOMPARE(toneColor(Tone::Waiting), statusForeground(RecordStatus::Processing));
    QCOMPARE(toneColor(Tone::WaitingBackground), statusBackground(RecordStatus::Processing));
    QCOMPARE(toneColor(Tone::NeedsPerson), statusForeground(RecordStatus::Unknown));
    QCOMPARE(toneColor(Tone::MoneyMoved), statusForeground(RecordStatus::Unknown));
    QCOMPARE(toneColor(Tone::Settleable), statusForeground(RecordStatus::Success));
    for (Tone t : {Tone::MutedText, Tone::Healthy, Tone::Warning, Tone::WarningBackground,
                   Tone::Alarm, Tone::AlarmBackground, Tone::ErrorText}) {
      QVERIFY(toneColor(t).isValid());
      QCOMPARE(toneCss(t), toneColor(t).name());
      QVERIFY(toneCss(t).startsWith(QLatin1Char('#')) && toneCss(t).size() == 7);
    }
    // A warning and an alarm never look alike, nor do their backgrounds.
    QVERIFY(toneColor(Tone::Warning) != toneColor(Tone::Alarm));
    QVERIFY(toneColor(Tone::WarningBackground) != toneColor(Tone::AlarmBackground));
  }
};

QTEST_GUILESS_MAIN(TestAdminUnits)
#include "tst_admin_units.moc"

#include "collectors/transitions_collector.hpp"

#include <pqxx/pqxx>

#include "collectors/registry.hpp"
#include "idem/bounded_transaction.hpp"
#include "idem/database_error.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

// The columns take() reads after id and created_at; the last, what decided an UNKNOWN record (the
// evidence's source, for the reconciler's decisions).
constexpr const char* kColumns =
    "coalesce(from_status, 'none'), to_status, actor_kind, coalesce(evidence->>'source', '')";

// Who decided an UNKNOWN record: the claimant's late answer, a person, or the reconciler from the
// evidence it names (a flow under the key when it names none: idem.reconcile).
std::optional<EvidenceSource> deciderOf(ActorKind actor, const char* source) {
  switch (actor) {
    case ActorKind::System:
      return EvidenceSource::Claimant;
    case ActorKind::Operator:
      return EvidenceSource::Operator;
    case ActorKind::Reconciler: {
      const auto named = tryParse<EvidenceSource>(source);
      if (named && *named != EvidenceSource::Claimant && *named != EvidenceSource::Operator)
        return named;
      return EvidenceSource::Ledger;
    }
  }
  return std::nullopt;
}

// The state machine, from the database that enforces it: every (from, to, actor_kind) of the
// vocabulary that idem.transition_allowed accepts ($1 holds NULL, a record's creation).
constexpr const char* kAllowed = R"SQL(
SELECT f, t, a
  FROM unnest($1::text[]) AS f, unnest($2::text[]) AS t, unnest($3::text[]) AS a
 WHERE idem.transition_allowed(f, t, a)
)SQL";

// {NULL,PROCESSING,...}: the values of E as a text[] literal, NULL first when asked.
template <typename E>
std::string arrayOf(bool withNull) {
  std::string out = withNull ? "{NULL" : "{";
  for (E value : allValues<E>()) {
    if (out.size() > 1) out += ',';
    out += format(value);
  }
  return out + "}";
}

}  // namespace

TransitionsCollector::TransitionsCollector(ReaderLimits limits, ReadStats& stats)
    : reader_(
          tableQueries("idem.transitions", kColumns),
          [&] {
            limits.window = std::chrono::milliseconds(0);  // no ratio reads transitions
            return limits;
          }(),
          stats.table("transitions")) {}

void TransitionsCollector::take(const pqxx::row& row, RowOrigin origin) {
  if (origin == RowOrigin::BeforeStart) return;
  FromStatus from;
  const bool fromKnown = TransitionCells::parseFrom(row[2].c_str(), from);
  const auto to = tryParse<RecordStatus>(row[3].c_str());
  const auto actor = tryParse<ActorKind>(row[4].c_str());
  if (!fromKnown || !to || !actor) {
    logWarn(std::string("idem.transitions id ") + row[0].c_str() + ": unknown status '" +
            row[2].c_str() + "' -> '" + row[3].c_str() + "' or actor kind '" + row[4].c_str() +
            "', not counted");
    return;
  }
  ++counts_[TransitionCells::index(from, *to, *actor)];
  if (from == FromStatus(RecordStatus::Unknown) &&
      (*to == RecordStatus::Success || *to == RecordStatus::Failed)) {
    if (const auto by = deciderOf(*actor, row[5].c_str()))
      ++unknownResolved_[static_cast<std::size_t>(*by)];
  }
}

// Once per session: the series of the allowed transitions exist from the first scrape. A database
// that refuses the question (a version-2 schema before sql/migrations/010 grants it) only loses
// those zeros; every transition is still counted.
void TransitionsCollector::readStateMachine(pqxx::connection& connection) {
  if (connection.backendpid() == stateMachineSession_) return;
  try {
    idem::ReadTransaction tx(connection);
    const pqxx::result rows =
        tx.exec_params(kAllowed, arrayOf<RecordStatus>(true), arrayOf<RecordStatus>(false),
                       arrayOf<ActorKind>(false));
    tx.commit();
    std::lock_guard lock(mutex_);
    for (const pqxx::row& row : rows) {
      FromStatus from;
      if (!row[0].is_null()) from = parse<RecordStatus>(row[0].c_str());
      shownFromStart_[TransitionCells::index(from, parse<RecordStatus>(row[1].c_str()),
                                             parse<ActorKind>(row[2].c_str()))] = true;
    }
  } catch (...) {
    const auto e = asDatabaseError(std::current_exception(), "read the state machine");
    if (!e || e->endsSession()) throw;
    logWarn(std::string(e->what()) + "; only the transitions counted get a series");
  }
  stateMachineSession_ = connection.backendpid();
}

void TransitionsCollector::update(pqxx::connection& connection) {
  readStateMachine(connection);
  reader_.pollAndPublish(
      connection, [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); },
      [this] {
        std::lock_guard lock(mutex_);
        published_ = counts_;
        publishedUnknownResolved_ = unknownResolved_;
      });
}

void TransitionsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto family = makeFamily("idempotency_transitions_total",
                           "Status changes of idempotency records (idem.transitions) since the "
                           "exporter started, as of the last collection; from=\"none\" is a "
                           "record's creation.",
                           prometheus::MetricType::Counter);
  auto resolved = makeFamily("idempotency_unknown_resolved_total",
                             "UNKNOWN records decided (SUCCESS or FAILED) since the exporter "
                             "started, by what decided them: the claimant's late answer, the "
                             "ledger (idem.reconcile), the gateway's callback, status lookup, "
                             "statement line or final statements' silence, or an operator.",
                             prometheus::MetricType::Counter);
  Cells cells;
  Shown shown;
  Deciders deciders;
  {
    std::lock_guard lock(mutex_);
    cells = published_;
    shown = shownFromStart_;
    deciders = publishedUnknownResolved_;
  }
  for (EvidenceSource by : allValues<EvidenceSource>()) {
    addSample(resolved, {{"by", std::string(format(by))}},
              static_cast<double>(deciders[static_cast<std::size_t>(by)]));
  }
  out.push_back(std::move(resolved));
  for (std::size_t f = 0; f < TransitionCells::kFrom; ++f) {
    const FromStatus from = TransitionCells::fromOf(f);
    for (RecordStatus to : allValues<RecordStatus>()) {
      for (ActorKind actor : allValues<ActorKind>()) {
        const std::size_t i = TransitionCells::index(from, to, actor);
        if (!shown[i] && cells[i] == 0) continue;
        addSample(family,
                  {{"from", TransitionCells::fromLabel(from)},
                   {"to", std::string(format(to))},
                   {"actor_kind", std::string(format(actor))}},
                  static_cast<double>(cells[i]));
      }
    }
  }
  out.push_back(std::move(family));
}

// The transitions collector joins the registry (registry.hpp).
[[maybe_unused]] const bool registered =
    registerCollector({.name = "transitions",
                       .order = 40,
                       .tables = {"transitions"},
                       .make = [](const CollectorContext& c) {
                         return std::make_unique<TransitionsCollector>(c.reader, c.readStats);
                       }});

}  // namespace idem::exporter

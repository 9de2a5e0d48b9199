#include "collectors/transitions_collector.hpp"

#include "collectors/registry.hpp"
#include "idem/vocabulary.hpp"
#include "log.hpp"
#include "metric_families.hpp"

namespace idem::exporter {
namespace {

constexpr const char* kRowsAfter = R"SQL(
SELECT id, extract(epoch FROM created_at)::float8, coalesce(from_status, 'none'), to_status, actor_kind
  FROM idem.transitions
 WHERE id > $1
 ORDER BY id
 LIMIT $2
)SQL";

constexpr const char* kRowsByIds = R"SQL(
SELECT id, extract(epoch FROM created_at)::float8, coalesce(from_status, 'none'), to_status, actor_kind
  FROM idem.transitions
 WHERE id = ANY($1::bigint[])
)SQL";

constexpr const char* kHighWater = "SELECT coalesce(max(id), 0) FROM idem.transitions";

constexpr const char* kWindowStartId = R"SQL(
SELECT min(id + 0) FROM idem.transitions WHERE created_at >= now() - $1::interval
)SQL";

// The cells whose series exist from the first scrape.
constexpr std::array<bool, TransitionCells::kCount> kShownFromStart = [] {
  std::array<bool, TransitionCells::kCount> shown{};
  for (const AllowedTransition& a : kAllowedTransitions) {
    shown[TransitionCells::index(a.from, a.to, a.actor)] = true;
  }
  return shown;
}();

}  // namespace

TransitionsCollector::TransitionsCollector(ReaderLimits limits, ReadStats& stats)
    : reader_(
          TableQueries{"idem.transitions", kRowsAfter, kRowsByIds, kHighWater, kWindowStartId},
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
}

void TransitionsCollector::update(pqxx::connection& connection) {
  auto publish = [this] {
    std::lock_guard lock(mutex_);
    published_ = counts_;
  };
  try {
    reader_.poll(connection, [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); });
  } catch (...) {
    publish();
    throw;
  }
  publish();
}

void TransitionsCollector::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto family = makeFamily("idempotency_transitions_total",
                           "Status changes of idempotency records (idem.transitions) since the "
                           "exporter started, as of the last collection; from=\"none\" is a "
                           "record's creation.",
                           prometheus::MetricType::Counter);
  Cells cells;
  {
    std::lock_guard lock(mutex_);
    cells = published_;
  }
  for (std::size_t f = 0; f < TransitionCells::kFrom; ++f) {
    const FromStatus from = TransitionCells::fromOf(f);
    for (RecordStatus to : allValues<RecordStatus>()) {
      for (ActorKind actor : allValues<ActorKind>()) {
        const std::size_t i = TransitionCells::index(from, to, actor);
        if (!kShownFromStart[i] && cells[i] == 0) continue;
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

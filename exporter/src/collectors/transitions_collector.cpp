#include "collectors/transitions_collector.hpp"

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

// The transitions the state machine allows (sql/002_state_machine.sql, idem.transition_allowed):
// their series exist from the first scrape. Anything else the history holds appears when seen.
struct Allowed {
  const char* from;
  RecordStatus to;
  ActorKind actor;
};
constexpr std::array<Allowed, 11> kAllowed{{
    {"none", RecordStatus::Processing, ActorKind::System},
    {"FAILED", RecordStatus::Processing, ActorKind::System},
    {"PROCESSING", RecordStatus::Success, ActorKind::System},
    {"PROCESSING", RecordStatus::Failed, ActorKind::System},
    {"PROCESSING", RecordStatus::Unknown, ActorKind::System},
    {"UNKNOWN", RecordStatus::Success, ActorKind::System},
    {"UNKNOWN", RecordStatus::Failed, ActorKind::System},
    {"PROCESSING", RecordStatus::Success, ActorKind::Operator},
    {"PROCESSING", RecordStatus::Failed, ActorKind::Operator},
    {"UNKNOWN", RecordStatus::Success, ActorKind::Operator},
    {"UNKNOWN", RecordStatus::Failed, ActorKind::Operator},
}};

// "none" is 0, then the statuses in vocabulary order.
std::optional<std::size_t> fromIndex(std::string_view text) {
  if (text == "none") return 0;
  if (const auto s = tryParse<RecordStatus>(text)) return static_cast<std::size_t>(*s) + 1;
  return std::nullopt;
}

std::string fromLabel(std::size_t index) {
  return index == 0 ? "none" : std::string(format(allValues<RecordStatus>()[index - 1]));
}

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
  const auto from = fromIndex(row[2].c_str());
  const auto to = tryParse<RecordStatus>(row[3].c_str());
  const auto actor = tryParse<ActorKind>(row[4].c_str());
  if (!from || !to || !actor) {
    logWarn(std::string("idem.transitions id ") + row[0].c_str() +
            ": unknown status or actor kind, not counted");
    return;
  }
  ++counts_[(*from * kTo + static_cast<std::size_t>(*to)) * kActors +
            static_cast<std::size_t>(*actor)];
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
  auto index = [](std::size_t from, RecordStatus to, ActorKind actor) {
    return (from * kTo + static_cast<std::size_t>(to)) * kActors + static_cast<std::size_t>(actor);
  };
  std::array<bool, kFrom * kTo * kActors> shown{};
  for (const Allowed& a : kAllowed) shown[index(*fromIndex(a.from), a.to, a.actor)] = true;
  for (std::size_t from = 0; from < kFrom; ++from) {
    for (RecordStatus to : allValues<RecordStatus>()) {
      for (ActorKind actor : allValues<ActorKind>()) {
        const std::size_t i = index(from, to, actor);
        if (!shown[i] && cells[i] == 0) continue;
        addSample(family,
                  {{"from", fromLabel(from)},
                   {"to", std::string(format(to))},
                   {"actor_kind", std::string(format(actor))}},
                  static_cast<double>(cells[i]));
      }
    }
  }
  out.push_back(std::move(family));
}

}  // namespace idem::exporter

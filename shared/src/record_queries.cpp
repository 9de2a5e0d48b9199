#include "idem/record_queries.hpp"

#include <pqxx/pqxx>

#include "idem/database_error.hpp"
#include "idem/sql_fragments.hpp"

namespace idem {

// The columns recordFromRow reads, in its order; last_error is given (whole, or cut for a list).
// clang-format off
#define IDEM_RECORD_COLUMNS(last_error)                                      \
  "idempotency_key, biz_type, biz_id, tool, request_hash, status, version, "  \
  IDEM_SQL_MICROS("lease_expires_at") ", " last_error ", attempt_count, "     \
  IDEM_SQL_MICROS("created_at") ", " IDEM_SQL_MICROS("updated_at")
// clang-format on

namespace {

// How many columns IDEM_RECORD_COLUMNS names: a row with more carries the payloads.
constexpr std::size_t kRecordListColumnCount = 12;

constexpr const char* kRecord =
    "SELECT " IDEM_RECORD_COLUMNS("last_error") ", request_payload::text, response_payload::text, "
    "retry_allowed FROM idem.records WHERE idempotency_key = $1";

constexpr const char* kTransitions =
    "SELECT id, idempotency_key, from_status, to_status, version, actor, actor_kind, reason, "
    "evidence::text, " IDEM_SQL_MICROS("created_at")
    " FROM idem.transitions WHERE idempotency_key = $1 AND version > $2 ORDER BY id";

constexpr const char* kAttempts =
    "SELECT id, idempotency_key, biz_type, biz_id, tool, trigger_source, outcome, request_hash, "
    "agent_id, trace_id, " IDEM_SQL_MICROS(
        "created_at") " FROM idem.attempts WHERE idempotency_key = $1 ORDER BY id DESC LIMIT $2";

constexpr const char* kFundFlows =
    "SELECT id, biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key, "
    "duplicate_of, " IDEM_SQL_MICROS(
        "created_at") ", idem.side_effect_role(biz_type, kind) "
                      "FROM idem.fund_flows WHERE biz_type = $1 AND biz_id = $2 ORDER BY id";

Timestamp micros(const pqxx::field& f) {
  return Timestamp(std::chrono::microseconds(f.as<long long>()));
}

std::optional<std::string> optionalText(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return std::string(f.c_str());
}

}  // namespace

const char* const kRecordListSelect =
    "SELECT " IDEM_RECORD_COLUMNS("left(last_error, 400)") " FROM idem.records";

Record recordFromRow(const pqxx::row& r) {
  Record out;
  out.idempotencyKey = r[0].c_str();
  out.bizType = r[1].c_str();
  out.bizId = r[2].c_str();
  out.tool = r[3].c_str();
  out.requestHash = r[4].c_str();
  out.status = parse<RecordStatus>(r[5].c_str());
  out.version = r[6].as<int>();
  if (!r[7].is_null()) out.leaseExpiresAt = micros(r[7]);
  out.lastError = optionalText(r[8]);
  out.attemptCount = r[9].as<int>();
  out.createdAt = micros(r[10]);
  out.updatedAt = micros(r[11]);
  if (r.size() > kRecordListColumnCount) {
    out.requestPayload = optionalText(r[12]);
    out.responsePayload = optionalText(r[13]);
    out.retryAllowed = r[14].as<bool>();
  }
  return out;
}

std::optional<Record> findRecord(pqxx::transaction_base& tx, const std::string& key) {
  return translatingErrors("read record", [&]() -> std::optional<Record> {
    const pqxx::result rows = tx.exec_params(kRecord, key);
    if (rows.empty()) return std::nullopt;
    return recordFromRow(rows[0]);
  });
}

std::vector<Transition> transitionsOf(pqxx::transaction_base& tx, const std::string& key,
                                      int afterVersion) {
  return translatingErrors("read transitions", [&] {
    std::vector<Transition> out;
    for (const pqxx::row& r : tx.exec_params(kTransitions, key, afterVersion)) {
      Transition t;
      t.id = r[0].as<std::int64_t>();
      t.idempotencyKey = r[1].c_str();
      if (!r[2].is_null()) t.fromStatus = parse<RecordStatus>(r[2].c_str());
      t.toStatus = parse<RecordStatus>(r[3].c_str());
      t.version = r[4].as<int>();
      t.actor = r[5].c_str();
      t.actorKind = parse<ActorKind>(r[6].c_str());
      t.reason = optionalText(r[7]);
      t.evidence = optionalText(r[8]);
      t.createdAt = micros(r[9]);
      out.push_back(std::move(t));
    }
    return out;
  });
}

std::vector<Attempt> attemptsOf(pqxx::transaction_base& tx, const std::string& key, int limit) {
  return translatingErrors("read attempts", [&] {
    std::vector<Attempt> out;
    for (const pqxx::row& r : tx.exec_params(kAttempts, key, limit)) {
      Attempt a;
      a.id = r[0].as<std::int64_t>();
      a.idempotencyKey = r[1].c_str();
      a.bizType = r[2].c_str();
      a.bizId = r[3].c_str();
      a.tool = r[4].c_str();
      a.triggerSource = parse<TriggerSource>(r[5].c_str());
      a.outcome = parse<Outcome>(r[6].c_str());
      a.requestHash = r[7].c_str();
      a.agentId = optionalText(r[8]);
      a.traceId = optionalText(r[9]);
      a.createdAt = micros(r[10]);
      out.push_back(std::move(a));
    }
    return out;
  });
}

std::vector<FundFlow> fundFlowsOf(pqxx::transaction_base& tx, const std::string& bizType,
                                  const std::string& bizId) {
  return translatingErrors("read fund flows", [&] {
    std::vector<FundFlow> out;
    for (const pqxx::row& r : tx.exec_params(kFundFlows, bizType, bizId)) {
      FundFlow f;
      f.id = r[0].as<std::int64_t>();
      f.bizType = r[1].c_str();
      f.bizId = r[2].c_str();
      f.kind = parse<FundFlowKind>(r[3].c_str());
      f.amountMinor = r[4].as<std::int64_t>();
      f.currency = r[5].c_str();
      f.externalRef = r[6].c_str();
      f.idempotencyKey = optionalText(r[7]);
      if (!r[8].is_null()) f.duplicateOf = r[8].as<std::int64_t>();
      f.createdAt = micros(r[9]);
      f.role = parse<SideEffectRole>(r[10].c_str());
      out.push_back(std::move(f));
    }
    return out;
  });
}

}  // namespace idem

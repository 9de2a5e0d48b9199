// The rows of the idem schema as C++ values. Payloads stay JSON text: the database validates them
// (jsonb) and each user of a payload parses it where it needs to.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "idem/vocabulary.hpp"

namespace idem {

// Microseconds since the Unix epoch, as timestamptz stores them.
using Timestamp = std::chrono::sys_time<std::chrono::microseconds>;

struct Record {
  std::string idempotencyKey;
  std::string bizType;
  std::string bizId;
  std::string tool;
  std::string requestHash;
  RecordStatus status = RecordStatus::Processing;
  int version = 0;
  std::optional<Timestamp> leaseExpiresAt;
  std::optional<std::string> requestPayload;
  std::optional<std::string> responsePayload;
  std::optional<std::string> lastError;
  int attemptCount = 0;
  Timestamp createdAt{};
  Timestamp updatedAt{};
  // May a FAILED record be claimed again by the same request (schema v2)? false: the failure is
  // final, a retry is replayed the error.
  bool retryAllowed = false;
};

struct Attempt {
  std::int64_t id = 0;
  std::string idempotencyKey;
  std::string bizType;
  std::string bizId;
  std::string tool;
  TriggerSource triggerSource = TriggerSource::Initial;
  Outcome outcome = Outcome::Executed;
  std::string requestHash;
  std::optional<std::string> agentId;
  std::optional<std::string> traceId;
  Timestamp createdAt{};
};

struct Transition {
  std::int64_t id = 0;
  std::string idempotencyKey;
  std::optional<RecordStatus> fromStatus;  // empty: the record's creation
  RecordStatus toStatus = RecordStatus::Processing;
  int version = 0;
  std::string actor;
  ActorKind actorKind = ActorKind::System;
  std::optional<std::string> reason;
  std::optional<std::string> evidence;
  Timestamp createdAt{};
};

// A fund flow as its writer reports it (ProtocolClient::recordFundFlow).
struct FundFlowInput {
  std::string bizType;
  std::string bizId;
  FundFlowKind kind = FundFlowKind::Debit;
  std::int64_t amountMinor = 0;
  std::string currency;
  std::string externalRef;
  std::optional<std::string> idempotencyKey;
};

// A fund flow as the ledger holds it: what was reported, plus what the database decided.
struct FundFlow : FundFlowInput {
  std::int64_t id = 0;
  std::optional<std::int64_t> duplicateOf;
  Timestamp createdAt{};
  // What the flow is to its business object's side effect, as the database reads its business
  // type's declaration (idem.side_effect_role): never decided again in C++.
  SideEffectRole role = SideEffectRole::None;

  bool isDuplicate() const { return duplicateOf.has_value(); }
};

}  // namespace idem

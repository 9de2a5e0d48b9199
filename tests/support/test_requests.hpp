// The begin request the suites start from: business object bizId of bizType (a payment unless
// said otherwise) through the tool "pay", or from a retry's source with a payload. Each suite sets
// what its cases vary on top of it.
#pragma once

#include <chrono>
#include <string>

#include "idem/protocol_client.hpp"

namespace idem::test {

inline BeginRequest payRequest(const std::string& key, const std::string& bizId,
                               const std::string& bizType = "payment",
                               std::chrono::milliseconds lease = BeginRequest{}.lease) {
  BeginRequest r;
  r.lease = lease;
  r.key = key;
  r.bizType = bizType;
  r.bizId = bizId;
  r.tool = "pay";
  return r;
}

// The same request as it reaches begin from `source`, carrying `payload` (what begin hashes: the
// same key with another payload is payload_mismatch).
inline BeginRequest payRequestFrom(const std::string& key, const std::string& bizId,
                                   TriggerSource source, const std::string& payload) {
  BeginRequest r = payRequest(key, bizId);
  r.source = source;
  r.requestPayload = payload;
  return r;
}

}  // namespace idem::test

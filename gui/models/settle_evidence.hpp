// The evidence an operator attaches to a settle, as the JSON idem.settle stores: a gateway
// reference and/or a JSON object (a statement line, a support ticket...). Built on the GUI thread,
// before anything is sent, so a typo is reported where it was typed.
#pragma once

#include <QString>
#include <optional>
#include <string>

#include "idem/domain.hpp"

namespace idem::admin {

struct EvidenceInput {
  QString gatewayReference;  // the gateway's transaction id, if the operator has one
  QString json;              // optional JSON object with more detail
};

struct EvidenceResult {
  std::optional<std::string> json;  // empty: no evidence given
  QString error;                    // non-empty: refuse, say why
};

// {"gateway_ref": "...", ...the object's own fields}. The JSON must be an object; a gateway
// reference that differs from the object's own "gateway_ref" is refused rather than guessed.
EvidenceResult buildEvidence(const EvidenceInput& input);

// The charge a reconciliation found ("money moved, no SUCCESS"), as the evidence the settle dialog
// starts from: its gateway reference, and the flow's id, kind and amount as the JSON object.
EvidenceInput evidenceOfCharge(const FundFlow& charge);

}  // namespace idem::admin

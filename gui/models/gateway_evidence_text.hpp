// A decision that rests on the gateway's own word, in words: the evidence JSON of a transition
// whose "source" is statement, callback, lookup or statement_absence (idem::EvidenceSource, as
// idem.match_statement_line, idem.ingest_gateway_event, idem.resolve_from_gateway_evidence and
// idem.resolve_absent write it, or an operator accepting a proposed match) read as a sentence:
// "resolved SUCCESS by stripe's statement line txn_123 (day.csv, line 7)".
#pragma once

#include <QString>

#include "idem/domain.hpp"

namespace idem::admin {

// Empty when the transition's evidence names no gateway source (or is not JSON).
QString gatewayEvidenceSentence(const Transition& transition);

}  // namespace idem::admin

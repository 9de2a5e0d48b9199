// Per gateway, what its final statements cover: the periods, merged, and the gaps between them.
// Absence from a final statement is evidence (idem.resolve_absent) only where the cover has no
// gap, and only for a gateway whose owner enabled it; a gap is where a person still decides.
#pragma once

#include <QString>
#include <cstdint>
#include <pqxx/connection>
#include <string>
#include <utility>
#include <vector>

#include "idem/domain.hpp"

namespace idem::admin {

using Period = std::pair<Timestamp, Timestamp>;  // [from, to)

struct GatewayCoverage {
  std::string gateway;
  std::vector<std::string> bizTypes;  // empty: none declared
  std::string settlementDelay;        // as PostgreSQL spells the interval: "3 days"
  bool absenceIsEvidence = false;
  std::int64_t files = 0;
  std::int64_t finalFiles = 0;
  std::vector<Period> covered;  // the final statements' periods, merged, in time order
  std::vector<Period> gaps;     // between the first and the last covered instant

  bool operator==(const GatewayCoverage&) const = default;
};

// Every gateway idem.gateways knows, by name.
std::vector<GatewayCoverage> readCoverage(pqxx::connection& c);

// One paragraph per gateway, as rich text: what is covered, the gaps, and whether absence counts.
QString coverageText(const std::vector<GatewayCoverage>& gateways);

}  // namespace idem::admin

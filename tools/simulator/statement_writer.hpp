// The simulated gateway's day, written as the gateway would send it: Stripe's itemized balance
// report, Adyen's settlement details report or an ISO 20022 camt.053 statement, one line per money
// movement the downstream made (whoever heard back), each carrying the key where a client puts it
// at that gateway (payment metadata, merchant reference, EndToEndId). idemctl import-statement
// reads them back, as it reads the real ones.
#pragma once

#include <string>
#include <vector>

#include "idem/statement_formats.hpp"

namespace idem::sim {

struct SideEffect;

// Writes `movements` (in the order given) to `path` in `format`: stripe, adyen or camt.053. A
// movement the format cannot carry is left out: a payout to a customer (CREDIT) is no line of a
// Stripe or Adyen report, a refund no credit or debit camt can tell from a payout. Throws
// std::runtime_error naming the file when it cannot be written, or the format when the simulator
// does not write it.
void writeStatementFile(const std::string& path, StatementFormat format,
                        const std::vector<SideEffect>& movements);

}  // namespace idem::sim

// Asking the gateway about the records whose answer was lost (`idemctl reconcile --lookup CONFIG`):
// each UNKNOWN record of the configured business types is looked up on the gateway's status
// endpoint (a read, never the call itself), and each answer is recorded through
// idem.record_lookup_answer by a login granted idem_ledger, which decides what the answer proves.
// A gateway that errors, times out or answers what the configuration cannot read decides nothing.
// docs/lookup.md describes the configuration.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/connection>
#include <string>
#include <vector>

namespace idem::ctl {

// A value read from the gateway's JSON answer: a JSON pointer (RFC 6901), e.g. /status.
struct AnswerField {
  std::string pointer;
};

struct LookupConfig {
  std::string file;  // where it was read from, for messages
  std::string gateway;
  std::vector<std::string> bizTypes;
  // The status endpoint, its {key} and {biz_id} replaced URL-encoded.
  std::string scheme;  // "http" or "https"
  std::string host;    // a name or an address (IPv6 without brackets)
  std::string port;
  std::string target;  // path and query, placeholders unexpanded
  // GET, or POST with a body: its {key} and {biz_id} replaced escaped for its content type (JSON
  // string characters, or URL-encoded for a form), its ${credential:NAME} already replaced.
  bool post = false;
  std::string body;
  std::string contentType;
  // Header values with every ${credential:NAME} already replaced: never printed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{5000};
  double ratePerSecond = 10;
  int maxPerRound = 100;
  int retries = 2;
  std::optional<std::string> caFile;

  AnswerField status;
  std::vector<std::string> happened;
  std::vector<std::string> notHappened;
  std::optional<unsigned> notFoundStatus;
  AnswerField amount;
  bool amountInMajorUnits = false;
  AnswerField currency;
  AnswerField reference;
  // The fund flow a "happened" answer is; none: the record's own side effect, its business type's
  // first effect kind (a payment's DEBIT, a refund's REFUND).
  std::optional<std::string> kind;
};

// Reads and checks the YAML configuration and the credentials it names. Throws UsageError
// "FILE:LINE:COLUMN: KEY: what" for a mistake in it (an unknown key, a missing one, a credential
// that cannot be read); never quotes a credential.
LookupConfig loadLookupConfig(const std::string& path);

// What one lookup round did.
struct LookupRound {
  int asked = 0;
  int succeeded = 0;  // the gateway says the side effect happened
  int failed = 0;     // it says it did not
  int unknown = 0;    // it does not know
  int errors = 0;     // it erred, timed out, or answered what cannot be read: decides nothing
  int resolvedSuccess = 0;
  int resolvedFailed = 0;
  int mismatched = 0;
  std::vector<std::string> notes;  // one line per error or mismatch, "KEY: what"
};

class GatewayLookup {
 public:
  explicit GatewayLookup(LookupConfig config);
  ~GatewayLookup();
  GatewayLookup(const GatewayLookup&) = delete;
  GatewayLookup& operator=(const GatewayLookup&) = delete;

  const LookupConfig& config() const;

  // Lists the UNKNOWN records of the configured business types through `reader` (least recently
  // asked first, then oldest, at most max_per_round), asks the gateway about each, and records each
  // answer through `ledger`. Stops early when `stop` is set. Throws DatabaseError when the
  // database fails; a gateway's failure is counted, never thrown.
  LookupRound runRound(pqxx::connection& reader, pqxx::connection& ledger,
                       const std::atomic<bool>& stop);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// "lookup: asked N: succeeded a, failed b, unknown c, errors d; resolved S SUCCESS, F FAILED,
// mismatched M", then the notes, one per line.
void printLookupRound(std::ostream& out, const std::string& when, const LookupRound& round);

}  // namespace idem::ctl

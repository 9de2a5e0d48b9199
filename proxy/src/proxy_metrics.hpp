// idemwatch-proxy's own figures, served at /metrics: requests by route and result, the upstream's
// latency, calls waiting for a database session, open connections. Every route's series exist
// from the start at zero, so rate() and absent() work from the first scrape.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace idem::proxy {

// What became of a request, the `result` label. Bounded: these and nothing else.
inline constexpr std::array<std::string_view, 16> kRequestResults{
    "sent",                  // claimed, sent upstream, its answer recorded and relayed
    "replayed",              // answered from the record, not sent
    "in_progress",           // 409: the key's claim is live
    "unknown",               // sent, outcome unknown now (timeout, cut answer, ambiguous 5xx)
    "unknown_refused",       // 409: a repeat of a key whose outcome is unknown
    "payload_mismatch",      // 422
    "refused",               // 409: business object taken, key retired, failed finally
    "invalid",               // 400: no key, a malformed key, no business object, bad trigger
    "not_sent",              // 502: the upstream refused the connection; retry allowed
    "late_claim",            // 503: claim acknowledged past its lease, given back unsent
    "database_unavailable",  // 503: nothing claimed, nothing sent
    "passed_through",        // a route without a required key, sent unclaimed
    "too_large",             // 413, or 431 for a header over 16 KiB
    "overloaded",            // 503: a connection beyond max_connections, turned away
    "unauthorized",          // 401: no valid basic-auth login (web config)
    "no_route",              // 404
};

class ProxyMetrics {
 public:
  explicit ProxyMetrics(const std::vector<std::string>& routes);

  // A route's series, at zero; nothing when it has them already (a route added by a reload).
  void addRoute(const std::string& route);
  // `route` "" for a request of no route; `result` one of kRequestResults.
  void request(const std::string& route, std::string_view result);
  void upstreamSeconds(const std::string& route, double seconds);
  // A request went out on a new upstream connection, or on one kept open from an earlier answer.
  void upstreamConnection(const std::string& route, bool reused);
  void connectionOpened() { connections_->Increment(); }
  void connectionClosed() { connections_->Decrement(); }
  void setWaiting(int calls) { waiting_->Set(calls); }
  void setPreparedStatements(bool prepared) { prepared_->Set(prepared ? 1 : 0); }
  std::string scrape() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requestFamily_;
  prometheus::Family<prometheus::Histogram>* upstreamFamily_;
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> requests_;
  std::map<std::string, prometheus::Histogram*> upstream_;
  prometheus::Family<prometheus::Counter>* connectionFamily_;
  std::map<std::pair<std::string, bool>, prometheus::Counter*> upstreamConnections_;
  prometheus::Gauge* connections_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* prepared_;
};

}  // namespace idem::proxy

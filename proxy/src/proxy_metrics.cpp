#include "proxy_metrics.hpp"

#include <prometheus/text_serializer.h>

namespace idem::proxy {

ProxyMetrics::ProxyMetrics(const std::vector<std::string>& routes)
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& requests = prometheus::BuildCounter()
                       .Name("idemwatch_proxy_requests_total")
                       .Help("Requests the proxy answered, by route and what became of them.")
                       .Register(*registry_);
  auto& upstream = prometheus::BuildHistogram()
                       .Name("idemwatch_proxy_upstream_duration_seconds")
                       .Help(
                           "From connecting to the upstream to the end of its answer, or to "
                           "giving up on it.")
                       .Register(*registry_);
  requestFamily_ = &requests;
  upstreamFamily_ = &upstream;
  connectionFamily_ = &prometheus::BuildCounter()
                           .Name("idemwatch_proxy_upstream_connections_total")
                           .Help(
                               "Requests sent upstream, by whether their connection was new or "
                               "kept open from an earlier answer (upstream_keepalive).")
                           .Register(*registry_);
  for (auto result : {"no_route", "too_large", "overloaded", "unauthorized"}) {
    requests_[{"", result}] = &requests.Add({{"route", ""}, {"result", result}});
  }
  for (const auto& route : routes) addRoute(route);
  connections_ = &prometheus::BuildGauge()
                      .Name("idemwatch_proxy_connections")
                      .Help("Client connections open now.")
                      .Register(*registry_)
                      .Add({});
  waiting_ = &prometheus::BuildGauge()
                  .Name("idemwatch_proxy_database_calls")
                  .Help("Protocol calls running or waiting for a database session now.")
                  .Register(*registry_)
                  .Add({});
  prepared_ = &prometheus::BuildGauge()
                   .Name("idemwatch_proxy_database_prepared_statements")
                   .Help(
                       "1 while database sessions send a claim's calls as prepared statements, 0 "
                       "once they send them unnamed (a pooler stands in between, or a session "
                       "lost its statements).")
                   .Register(*registry_)
                   .Add({});
  prepared_->Set(1);
}

void ProxyMetrics::addRoute(const std::string& route) {
  if (upstream_.contains(route)) return;
  const prometheus::Histogram::BucketBoundaries buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                        0.5,   1,    2.5,   5,    10,  30};
  for (auto result : kRequestResults) {
    requests_[{route, std::string(result)}] =
        &requestFamily_->Add({{"route", route}, {"result", std::string(result)}});
  }
  upstream_[route] = &upstreamFamily_->Add({{"route", route}}, buckets);
  for (const bool reused : {false, true}) {
    upstreamConnections_[{route, reused}] =
        &connectionFamily_->Add({{"route", route}, {"connection", reused ? "reused" : "new"}});
  }
}

void ProxyMetrics::request(const std::string& route, std::string_view result) {
  auto it = requests_.find({route, std::string(result)});
  if (it != requests_.end()) it->second->Increment();
}

void ProxyMetrics::upstreamSeconds(const std::string& route, double seconds) {
  auto it = upstream_.find(route);
  if (it != upstream_.end()) it->second->Observe(seconds);
}

void ProxyMetrics::upstreamConnection(const std::string& route, bool reused) {
  auto it = upstreamConnections_.find({route, reused});
  if (it != upstreamConnections_.end()) it->second->Increment();
}

std::string ProxyMetrics::scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace idem::proxy

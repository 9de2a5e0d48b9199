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
  const prometheus::Histogram::BucketBoundaries buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                        0.5,   1,    2.5,   5,    10,  30};
  std::vector<std::string> labelled = routes;
  labelled.emplace_back("");
  for (const auto& route : labelled) {
    for (auto result : kRequestResults) {
      if (route.empty() && result != "no_route" && result != "too_large") continue;
      requests_[{route, std::string(result)}] =
          &requests.Add({{"route", route}, {"result", std::string(result)}});
    }
    if (!route.empty()) upstream_[route] = &upstream.Add({{"route", route}}, buckets);
  }
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
}

void ProxyMetrics::request(const std::string& route, std::string_view result) {
  auto it = requests_.find({route, std::string(result)});
  if (it != requests_.end()) it->second->Increment();
}

void ProxyMetrics::upstreamSeconds(const std::string& route, double seconds) {
  auto it = upstream_.find(route);
  if (it != upstream_.end()) it->second->Observe(seconds);
}

std::string ProxyMetrics::scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace idem::proxy

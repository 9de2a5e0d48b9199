#include "metric_families.hpp"

#include <limits>

namespace idem::exporter {

prometheus::MetricFamily makeFamily(std::string name, std::string help,
                                    prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

namespace {
prometheus::ClientMetric& newMetric(prometheus::MetricFamily& family, const Labels& labels) {
  prometheus::ClientMetric& m = family.metric.emplace_back();
  m.label.reserve(labels.size());
  for (const auto& [name, value] : labels) m.label.push_back({name, value});
  return m;
}
}  // namespace

void addSample(prometheus::MetricFamily& family, const Labels& labels, double value) {
  prometheus::ClientMetric& m = newMetric(family, labels);
  if (family.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else if (family.type == prometheus::MetricType::Gauge) {
    m.gauge.value = value;
  } else {
    m.untyped.value = value;
  }
}

void addHistogram(prometheus::MetricFamily& family, const Labels& labels,
                  const std::vector<double>& upperBounds,
                  const std::vector<std::uint64_t>& cumulativeCounts, std::uint64_t count,
                  double sum) {
  prometheus::ClientMetric& m = newMetric(family, labels);
  m.histogram.sample_count = count;
  m.histogram.sample_sum = sum;
  for (std::size_t i = 0; i < upperBounds.size(); ++i) {
    m.histogram.bucket.push_back({cumulativeCounts[i], upperBounds[i]});
  }
  m.histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
}

}  // namespace idem::exporter

// Building prometheus::MetricFamily values by hand: the collectors publish snapshots of their own
// state through a custom Collectable, so a scrape copies numbers and never waits on a collection.
#pragma once

#include <prometheus/metric_family.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace idem::exporter {

using Labels = std::vector<std::pair<std::string, std::string>>;

prometheus::MetricFamily makeFamily(std::string name, std::string help,
                                    prometheus::MetricType type);

// A counter or gauge sample, by the family's type.
void addSample(prometheus::MetricFamily& family, const Labels& labels, double value);

// A histogram sample: cumulative bucket counts for the given upper bounds (+Inf is added).
void addHistogram(prometheus::MetricFamily& family, const Labels& labels,
                  const std::vector<double>& upperBounds,
                  const std::vector<std::uint64_t>& cumulativeCounts, std::uint64_t count,
                  double sum);

}  // namespace idem::exporter

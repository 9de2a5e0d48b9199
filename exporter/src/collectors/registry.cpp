#include "collectors/registry.hpp"

#include <algorithm>
#include <deque>

namespace idem::exporter {

// A function's static, not a namespace-scope one: registrations run during static
// initialisation, in an order across files that C++ leaves open. A deque: pointers to its
// elements stay valid as it grows.
static std::deque<CollectorRegistration>& registrations() {
  static std::deque<CollectorRegistration> all;
  return all;
}

bool registerCollector(CollectorRegistration registration) {
  registrations().push_back(std::move(registration));
  return true;
}

std::vector<const CollectorRegistration*> registeredCollectors() {
  std::vector<const CollectorRegistration*> out;
  for (const CollectorRegistration& r : registrations()) out.push_back(&r);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return a->order != b->order ? a->order < b->order : a->name < b->name;
  });
  return out;
}

bool isEnabled(const CollectorRegistration& registration, const ExporterOptions& options) {
  const auto it = options.collectors.find(registration.name);
  return it == options.collectors.end() ? registration.enabledByDefault : it->second;
}

}  // namespace idem::exporter

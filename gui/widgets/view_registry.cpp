#include "widgets/view_registry.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace idem::admin {

// A function's static, not a namespace-scope one: registrations run during static
// initialisation, in an order across files that C++ leaves open. A deque: pointers to its
// elements stay valid as it grows.
static std::deque<ViewRegistration>& registrations() {
  static std::deque<ViewRegistration> all;
  return all;
}

bool registerView(ViewRegistration registration) {
  const std::string name = registration.name.toStdString();
  if (name.empty())
    throw std::invalid_argument("registerView: a view needs a name (its tab title)");
  if (!registration.make) {
    throw std::invalid_argument("registerView: view \"" + name + "\" has no factory");
  }
  for (const ViewRegistration& r : registrations()) {
    if (r.name == registration.name) {
      throw std::invalid_argument("registerView: a view named \"" + name +
                                  "\" is already registered; tab titles must be unique");
    }
  }
  registrations().push_back(std::move(registration));
  return true;
}

std::vector<const ViewRegistration*> registeredViews() {
  std::vector<const ViewRegistration*> out;
  for (const ViewRegistration& r : registrations()) out.push_back(&r);
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    return a->order != b->order ? a->order < b->order : a->name < b->name;
  });
  return out;
}

}  // namespace idem::admin

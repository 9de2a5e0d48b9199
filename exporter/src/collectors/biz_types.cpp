#include "collectors/biz_types.hpp"

namespace idem::exporter {

std::size_t BizTypes::intern(std::string_view bizType) {
  std::lock_guard lock(mutex_);
  const auto found = index_.find(bizType);
  if (found != index_.end()) return found->second;
  names_.emplace_back(bizType);
  index_.emplace(std::string(bizType), names_.size() - 1);
  return names_.size() - 1;
}

std::vector<std::string> BizTypes::names() const {
  std::lock_guard lock(mutex_);
  return names_;
}

}  // namespace idem::exporter

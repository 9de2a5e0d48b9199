#include "collectors/biz_types.hpp"

namespace idem::exporter {

BizTypes::BizTypes(std::size_t maxBizTypes, const std::vector<std::string>& kept)
    : maxBizTypes_(maxBizTypes) {
  std::lock_guard lock(mutex_);
  for (const std::string& biz : kept) {
    if (index_.find(biz) != index_.end()) continue;
    const std::size_t i = add(biz);
    if (biz == kOther) other_ = i;
  }
}

std::size_t BizTypes::add(std::string_view bizType) {
  names_.emplace_back(bizType);
  index_.emplace(std::string(bizType), names_.size() - 1);
  return names_.size() - 1;
}

std::size_t BizTypes::intern(std::string_view bizType, bool* overflow) {
  std::lock_guard lock(mutex_);
  const auto found = index_.find(bizType);
  if (found != index_.end() && found->second != other_) return found->second;
  if (found != index_.end() || bizType == kOther) {
    // "other" itself, as a biz type of the data: its rows share the bucket, none overflowed.
    if (other_ == SIZE_MAX) other_ = add(kOther);
    return other_;
  }
  // The kept ones do not count against the bound, nor does "other".
  if (admitted_ < maxBizTypes_) {
    ++admitted_;
    return add(bizType);
  }
  if (other_ == SIZE_MAX) other_ = add(kOther);
  if (overflow) *overflow = true;
  return other_;
}

std::string BizTypes::labelOf(std::string_view bizType) {
  const std::size_t i = intern(bizType);
  std::lock_guard lock(mutex_);
  return names_[i];
}

std::vector<std::string> BizTypes::names() const {
  std::lock_guard lock(mutex_);
  return names_;
}

}  // namespace idem::exporter

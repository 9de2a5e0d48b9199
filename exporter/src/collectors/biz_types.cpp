#include "collectors/biz_types.hpp"

#include "log.hpp"

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
  if (!warned_) {
    // Once per process: the bound is a decision the operator should hear of, not a flood. A v1
    // schema allows long biz types; the line names at most 64 characters of the first one.
    warned_ = true;
    logWarn("biz_type label bound reached: " + std::to_string(maxBizTypes_) +
            " distinct biz types are kept (--max-biz-types); \"" +
            std::string(bizType.substr(0, 64)) + (bizType.size() > 64 ? "...\"" : "\"") +
            " and every later new biz type are counted under biz_type=\"other\" and in "
            "idempotency_exporter_biz_types_overflow_total");
  }
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

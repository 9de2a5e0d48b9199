// The biz_type label values seen so far, shared by every collector with a biz_type label so that
// a biz type's series exist in all of them, at 0, from the first row that names it anywhere.
// Interned to small indexes so that counters are dense arrays.
//
// Bounded by construction (docs/contract/metrics.md v2): at most --max-biz-types values, first
// come first kept, those of --reconcile-biz-types always kept; rows of any further biz type are
// counted under biz_type="other" and in idempotency_exporter_biz_types_overflow_total, so no input
// can make a scrape grow without bound.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::exporter {

class BizTypes {
 public:
  static constexpr std::string_view kOther = "other";

  // `kept` are interned first and never count against the bound.
  explicit BizTypes(std::size_t maxBizTypes = 100, const std::vector<std::string>& kept = {});

  // The index of a biz type's label, adding it on first sight while there is room; beyond the
  // bound the index of "other", and *overflow (when given) is set. Any thread.
  std::size_t intern(std::string_view bizType, bool* overflow = nullptr);
  // The label a biz type is published under: itself or "other". Any thread.
  std::string labelOf(std::string_view bizType);
  // All labels; the index of each is its position. Any thread.
  std::vector<std::string> names() const;

  // Rows counted under "other" (idempotency_exporter_biz_types_overflow_total).
  void countOverflow() { overflowRows_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t overflowRows() const { return overflowRows_.load(std::memory_order_relaxed); }

 private:
  std::size_t add(std::string_view bizType);  // mutex_ held

  const std::size_t maxBizTypes_;
  std::size_t admitted_ = 0;  // biz types kept under the bound (not the kept ones, not "other")
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> index_;
  std::size_t other_ = SIZE_MAX;  // the index of "other" once an overflow created it
  bool warned_ = false;           // the bound was hit and the log said so
  std::atomic<std::uint64_t> overflowRows_{0};
};

}  // namespace idem::exporter

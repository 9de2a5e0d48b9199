// The biz_type label values seen so far, shared by every collector with a biz_type label so that
// a biz type's series exist in all of them, at 0, from the first row that names it anywhere.
// Interned to small indexes so that counters are dense arrays.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::exporter {

class BizTypes {
 public:
  // The index of a biz type, adding it on first sight. Any thread.
  std::size_t intern(std::string_view bizType);
  // All known biz types; the index of each is its position. Any thread.
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> index_;
};

}  // namespace idem::exporter

#include "models/reconnect_backoff.hpp"

#include <algorithm>

namespace idem::admin {

std::chrono::milliseconds ReconnectBackoff::next() {
  auto wait = first_;
  for (int i = 0; i < failures_ && wait < ceiling_; ++i) wait *= 2;
  ++failures_;
  return std::min(wait, ceiling_);
}

}  // namespace idem::admin

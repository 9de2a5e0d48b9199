// When to try the database again after losing it: quickly at first (a restarted server is back in
// a second), then doubling up to a ceiling, so a long outage costs the server almost nothing.
#pragma once

#include <chrono>

namespace idem::admin {

class ReconnectBackoff {
 public:
  ReconnectBackoff() = default;
  ReconnectBackoff(std::chrono::milliseconds first, std::chrono::milliseconds ceiling)
      : first_(first), ceiling_(ceiling) {}

  // The wait before the next attempt; each call doubles the following one.
  std::chrono::milliseconds next();
  // A connection succeeded: the next loss starts from `first` again.
  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  std::chrono::milliseconds first_{std::chrono::seconds(1)};
  std::chrono::milliseconds ceiling_{std::chrono::seconds(30)};
  int failures_ = 0;
};

}  // namespace idem::admin

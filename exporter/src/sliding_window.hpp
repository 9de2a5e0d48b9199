// Counts over the last --ratio-window, by the rows' created_at, kept in memory so that the three
// ratio gauges cost no query. Time is cut into at most 3600 buckets (1s wide for windows up to an
// hour): a bucket is reused once the window has moved past it.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace idem::exporter {

template <std::size_t N>
class SlidingWindow {
 public:
  using Counts = std::array<std::int64_t, N>;

  explicit SlidingWindow(std::chrono::milliseconds window)
      : windowSeconds_(static_cast<double>(window.count()) / 1000.0),
        bucketSeconds_(std::max(1.0, windowSeconds_ / 3600.0)),
        buckets_(static_cast<std::size_t>(std::ceil(windowSeconds_ / bucketSeconds_)) + 2) {}

  // Adds delta at time t (seconds since the epoch). Rows older than the window, as seen from the
  // newest time given so far, are ignored.
  void add(double t, std::size_t index, std::int64_t delta = 1) {
    const std::int64_t slot = slotOf(t);
    if (slot <= newestSlot_ - static_cast<std::int64_t>(buckets_.size()) + 1) return;
    Bucket& b = buckets_[static_cast<std::size_t>(slot) % buckets_.size()];
    if (b.slot != slot) {
      if (b.slot > slot) return;  // taken by a newer slot: t is out of the window
      b.slot = slot;
      b.counts.fill(0);
    }
    b.counts[index] += delta;
    newestSlot_ = std::max(newestSlot_, slot);
  }

  // Sums over the window ending at now, to the bucket (the oldest, partly expired bucket is left
  // out). Rows stamped after now (a writer's transaction began before our snapshot) count.
  Counts sum(double now) const {
    Counts total{};
    const std::int64_t first = slotOf(now - windowSeconds_) + 1;
    for (const Bucket& b : buckets_) {
      if (b.slot >= first) {
        for (std::size_t i = 0; i < N; ++i) total[i] += b.counts[i];
      }
    }
    return total;
  }

 private:
  struct Bucket {
    std::int64_t slot = INT64_MIN;
    Counts counts{};
  };
  std::int64_t slotOf(double t) const {
    return static_cast<std::int64_t>(std::floor(t / bucketSeconds_));
  }

  double windowSeconds_;
  double bucketSeconds_;
  std::vector<Bucket> buckets_;
  std::int64_t newestSlot_ = INT64_MIN / 2;
};

}  // namespace idem::exporter

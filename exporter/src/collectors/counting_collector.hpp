// What the counting collectors (requests, fund flows) share: an incremental reader over one idem
// table, counter cells by biz type kept on the collection thread, a sliding window over
// --ratio-window, and a copy of both that scrapes read under a mutex. A collector built on it
// says only what differs: its table and columns, how a row becomes cells and window counts
// (take), and its families (collect, from snapshot()).
//
// Window slot kAll counts every row taken; each slot's share is its count over kAll's, so a
// collector's ratios are the shares of its other slots.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "incremental_reader.hpp"
#include "sliding_window.hpp"

namespace idem::exporter {

template <typename Cells, std::size_t WindowSlots>
class CountingCollector : public Collector {
 public:
  void update(pqxx::connection& connection) final {
    reader_.pollAndPublish(
        connection, [this](const pqxx::row& row, RowOrigin origin) { take(row, origin); },
        [this] { publish(); });
  }
  std::vector<IncrementalReader*> readers() final { return {&reader_}; }

 protected:
  using Window = SlidingWindow<WindowSlots>;
  static constexpr std::size_t kAll = 0;

  // What the last collection published, as a scrape reads it.
  struct Snapshot {
    // Every biz type known so far with its cells, zeros for one not counted here yet.
    std::vector<std::pair<std::string, Cells>> byBizType;
    // By window slot: its count over kAll's over --ratio-window; NaN without rows or before
    // the reader started.
    std::array<double, WindowSlots> shares;
  };

  // Rows are "id, created_at, biz_type, <columns>" of idem.<table>.
  CountingCollector(std::shared_ptr<BizTypes> bizTypes, const std::string& table,
                    const std::string& columns, ReaderLimits limits, ReadStats& stats)
      : bizTypes_(std::move(bizTypes)),
        reader_(tableQueries("idem." + table, "biz_type, " + columns), limits, stats.table(table)),
        window_(limits.window) {
    shares_.fill(kNaN);
  }

  // Collection thread: counts one row, by cellsFor() and window().
  virtual void take(const pqxx::row& row, RowOrigin origin) = 0;

  // The cells a row counts in, its biz type interned either way so that the biz type's series
  // exist from the first row that names it; nullptr for a row committed before the start, which
  // only feeds the window.
  Cells* cellsFor(const pqxx::row& row, RowOrigin origin) {
    bool overflow = false;
    const std::size_t biz = bizTypes_->intern(row[2].c_str(), &overflow);
    if (origin == RowOrigin::BeforeStart) return nullptr;
    if (overflow) bizTypes_->countOverflow();
    if (counts_.size() <= biz) counts_.resize(biz + 1, Cells{});
    return &counts_[biz];
  }

  Window& window() { return window_; }

  // Any thread.
  Snapshot snapshot() const {
    const std::vector<std::string> bizNames = bizTypes_->names();
    Snapshot s;
    s.byBizType.reserve(bizNames.size());
    std::lock_guard lock(mutex_);
    for (std::size_t b = 0; b < bizNames.size(); ++b) {
      s.byBizType.emplace_back(bizNames[b], b < published_.size() ? published_[b] : Cells{});
    }
    s.shares = shares_;
    return s;
  }

 private:
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  void publish() {
    const typename Window::Counts w = window_.sum(reader_.snapshotTime());
    std::lock_guard lock(mutex_);
    published_ = counts_;
    if (!reader_.started()) return;  // no window yet: the shares stay NaN
    const auto all = static_cast<double>(w[kAll]);
    for (std::size_t i = 0; i < WindowSlots; ++i) {
      shares_[i] = w[kAll] == 0 ? kNaN : static_cast<double>(w[i]) / all;
    }
  }

  std::shared_ptr<BizTypes> bizTypes_;
  IncrementalReader reader_;
  // Collection thread only.
  std::vector<Cells> counts_;  // by biz type index
  Window window_;

  mutable std::mutex mutex_;  // guards what scrapes read
  std::vector<Cells> published_;
  std::array<double, WindowSlots> shares_;
};

}  // namespace idem::exporter

#include "event_loop_stall.hpp"

#include <ctime>

namespace idem::bench {
namespace {
constexpr int kIntervalMs = 5;

qint64 threadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return qint64(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}
}  // namespace

EventLoopStall::EventLoopStall(QObject* parent) : QObject(parent) {
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(kIntervalMs);
  connect(&timer_, &QTimer::timeout, this, &EventLoopStall::tick);
}

void EventLoopStall::start() {
  clock_.start();
  lastNs_ = 0;
  lastCpuNs_ = threadCpuNs();
  timer_.start();
}

void EventLoopStall::reset() {
  lastNs_ = clock_.nsecsElapsed();
  lastCpuNs_ = threadCpuNs();
  longestNs_ = 0;
  longestBusyNs_ = 0;
  over16_ = 0;
  over50_ = 0;
  ticks_ = 0;
}

void EventLoopStall::tick() {
  const qint64 now = clock_.nsecsElapsed();
  const qint64 stall = now - lastNs_ - qint64(kIntervalMs) * 1'000'000;
  lastNs_ = now;
  const qint64 cpu = threadCpuNs();
  longestBusyNs_ = std::max(longestBusyNs_, cpu - lastCpuNs_);
  lastCpuNs_ = cpu;
  ++ticks_;
  if (stall > longestNs_) longestNs_ = stall;
  if (stall > 16'000'000) ++over16_;
  if (stall > 50'000'000) ++over50_;
}

}  // namespace idem::bench

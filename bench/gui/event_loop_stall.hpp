// How long the GUI thread's event loop was ever kept from running: a 5 ms timer notes the gap
// between its ticks; the gap beyond 5 ms is a stall (a database call on the GUI thread would show
// up here as the statement's whole duration). On a shared or small machine part of a gap is the
// scheduler running other processes, so the thread's own CPU time between ticks is noted too: the
// work the GUI thread itself did while the loop was not ticking.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace idem::bench {

class EventLoopStall : public QObject {
  Q_OBJECT

 public:
  explicit EventLoopStall(QObject* parent = nullptr);

  void start();
  void reset();
  double longestMs() const { return static_cast<double>(longestNs_) / 1e6; }
  double longestBusyMs() const { return static_cast<double>(longestBusyNs_) / 1e6; }
  int over16Ms() const { return over16_; }
  int over50Ms() const { return over50_; }
  long long ticks() const { return ticks_; }

 private:
  void tick();

  QTimer timer_;
  QElapsedTimer clock_;
  qint64 lastNs_ = 0;
  qint64 longestNs_ = 0;
  qint64 lastCpuNs_ = 0;
  qint64 longestBusyNs_ = 0;
  int over16_ = 0;
  int over50_ = 0;
  long long ticks_ = 0;
};

}  // namespace idem::bench

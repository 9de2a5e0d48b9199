// "last refreshed 14:02:31" beside a view: when its rows were last read from the database (local
// time), so an operator knows how old what they look at is, paused or not.
#pragma once

#include <QLabel>
#include <QTime>

namespace idem::admin {

class RefreshStamp : public QLabel {
  Q_OBJECT

 public:
  explicit RefreshStamp(QWidget* parent = nullptr);

  // Now: fresh rows arrived.
  void stamp();
  // The read failed: the time stays, marked as stale.
  void markFailed(const QString& why);
  QTime last() const { return last_; }

 private:
  QTime last_;
};

}  // namespace idem::admin

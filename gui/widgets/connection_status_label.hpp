// The status bar's connection state: who is connected where, or "disconnected, retrying in 3 s"
// counting down while the worker waits to reconnect.
#pragma once

#include <QLabel>
#include <QTimer>

namespace idem::admin {

class DatabaseSession;

class ConnectionStatusLabel : public QLabel {
  Q_OBJECT

 public:
  explicit ConnectionStatusLabel(DatabaseSession* session, QWidget* parent = nullptr);

 private:
  void update();

  DatabaseSession* session_;
  QTimer countdown_;
};

}  // namespace idem::admin

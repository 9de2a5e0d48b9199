#include "widgets/connection_status_label.hpp"

#include "models/database_session.hpp"
#include "models/status_palette.hpp"

namespace idem::admin {
namespace {

QString dot(Tone tone) {
  return QStringLiteral("<span style=\"color:%1;\">&#9679;</span>&nbsp;").arg(toneCss(tone));
}

QString firstLine(const QString& text) {
  return text.section(QLatin1Char('\n'), 0, 0);
}

}  // namespace

ConnectionStatusLabel::ConnectionStatusLabel(DatabaseSession* session, QWidget* parent)
    : QLabel(parent), session_(session) {
  setObjectName(QStringLiteral("connectionStatus"));
  setTextFormat(Qt::RichText);
  countdown_.setInterval(250);
  connect(&countdown_, &QTimer::timeout, this, &ConnectionStatusLabel::update);
  connect(session_, &DatabaseSession::stateChanged, this, &ConnectionStatusLabel::update);
  connect(session_, &DatabaseSession::connected, this, &ConnectionStatusLabel::update);
  connect(session_, &DatabaseSession::disconnected, this, &ConnectionStatusLabel::update);
  update();
}

void ConnectionStatusLabel::update() {
  const ConnectionInfo& info = session_->info();
  switch (session_->state()) {
    case ConnectionState::Closed:
      countdown_.stop();
      setText(dot(Tone::MutedText) + QStringLiteral("not connected"));
      setToolTip(QStringLiteral("File \u25B8 Connect\u2026 (Ctrl+K)"));
      return;
    case ConnectionState::Connecting:
      countdown_.stop();
      setText(
          dot(Tone::Warning) +
          QStringLiteral("connecting to %1\u2026").arg(session_->describeTarget().toHtmlEscaped()));
      setToolTip({});
      return;
    case ConnectionState::Connected:
      countdown_.stop();
      setText(dot(Tone::Healthy) +
              QStringLiteral("connected as <b>%1</b> (%2) to %3 on %4 \u00B7 PostgreSQL %5")
                  .arg(info.role.toHtmlEscaped(),
                       info.isOperator ? QStringLiteral("operator") : QStringLiteral("read-only"),
                       info.database.toHtmlEscaped(), info.server.toHtmlEscaped(),
                       info.serverVersion.section(QLatin1Char(' '), 0, 0).toHtmlEscaped()));
      setToolTip(QStringLiteral("%1 (from %2)").arg(session_->describeTarget(), info.source));
      return;
    case ConnectionState::Disconnected: {
      const QString error = firstLine(session_->lastError());
      if (const auto retry = session_->nextRetry()) {
        if (!countdown_.isActive()) countdown_.start();
        const qint64 seconds = (retry->remainingTime() + 999) / 1000;
        setText(dot(Tone::Alarm) + QStringLiteral("<b>disconnected, retrying in %1 s</b>: %2")
                                       .arg(seconds)
                                       .arg(error.left(140).toHtmlEscaped()));
      } else {
        countdown_.stop();
        setText(
            dot(Tone::Alarm) +
            QStringLiteral(
                "<b>disconnected</b>: %1 \u2014 File \u25B8 Connect\u2026 to change the connection")
                .arg(error.left(140).toHtmlEscaped()));
      }
      setToolTip(session_->lastError());
      return;
    }
  }
}

}  // namespace idem::admin

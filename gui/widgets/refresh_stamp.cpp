#include "widgets/refresh_stamp.hpp"

#include "models/status_palette.hpp"

namespace idem::admin {

RefreshStamp::RefreshStamp(QWidget* parent) : QLabel(parent) {
  setObjectName(QStringLiteral("refreshStamp"));
  setTextFormat(Qt::RichText);
  setText(QStringLiteral("not refreshed yet"));
}

void RefreshStamp::stamp() {
  last_ = QTime::currentTime();
  setText(QStringLiteral("last refreshed %1").arg(last_.toString(QStringLiteral("HH:mm:ss"))));
  setToolTip({});
}

void RefreshStamp::markFailed(const QString& why) {
  const QString when =
      last_.isValid() ? last_.toString(QStringLiteral("HH:mm:ss")) : QStringLiteral("never");
  setText(QStringLiteral("last refreshed %1 \u00B7 <span style=\"color:%2;\">refresh failed</span>")
              .arg(when, toneCss(Tone::Alarm)));
  setToolTip(why);
}

}  // namespace idem::admin

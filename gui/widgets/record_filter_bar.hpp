// The records table's filters: status, biz type, time range, exact key, biz_id prefix, order. It
// only builds a RecordFilter; the server applies it. Typing is debounced so a filter is sent once
// the operator pauses, not for every keystroke.
#pragma once

#include <QStringList>
#include <QTimer>
#include <QWidget>

#include "models/record_filter.hpp"

class QComboBox;
class QDateTimeEdit;
class QLineEdit;
class QToolButton;

namespace idem::admin {

class RecordFilterBar : public QWidget {
  Q_OBJECT

 public:
  explicit RecordFilterBar(QWidget* parent = nullptr);

  RecordFilter filter() const;
  void setOrder(RecordOrder order);
  // Values for the biz type completer (those seen in loaded rows).
  void addKnownBizTypes(const QStringList& bizTypes);
  // Ctrl+F: to the key field, text selected.
  void focusSearch();
  // Emits filterChanged now instead of after the typing pause.
  void applyNow();
  void clear();

  QLineEdit* keyEdit() const { return key_; }
  QLineEdit* bizIdPrefixEdit() const { return bizIdPrefix_; }
  QComboBox* statusCombo() const { return status_; }
  QComboBox* bizTypeCombo() const { return bizType_; }
  QComboBox* timeCombo() const { return time_; }
  QComboBox* orderCombo() const { return order_; }

 signals:
  void filterChanged(const idem::admin::RecordFilter& filter);

 private:
  void setUpFields();
  void layOutFields();
  void wireSignals();
  void scheduleApply();
  void updateCustomRange();

  QComboBox* status_;
  QComboBox* bizType_;
  QLineEdit* key_;
  QLineEdit* bizIdPrefix_;
  QComboBox* time_;
  QDateTimeEdit* from_;
  QDateTimeEdit* to_;
  QComboBox* order_;
  QToolButton* clear_;
  QTimer debounce_;
  RecordFilter lastEmitted_;
};

}  // namespace idem::admin

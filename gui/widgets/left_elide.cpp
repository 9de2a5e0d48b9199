#include "widgets/left_elide.hpp"

#include <QAbstractItemView>
#include <QStyledItemDelegate>

namespace idem::admin {
namespace {

class LeftElideDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

 protected:
  void initStyleOption(QStyleOptionViewItem* option, const QModelIndex& index) const override {
    QStyledItemDelegate::initStyleOption(option, index);
    option->textElideMode = Qt::ElideLeft;
  }
};

}  // namespace

void elideFromLeft(QAbstractItemView* view, std::initializer_list<int> columns) {
  auto* delegate = new LeftElideDelegate(view);
  for (int column : columns) view->setItemDelegateForColumn(column, delegate);
}

}  // namespace idem::admin

// Idempotency keys and biz ids differ at their end ("checkout:ord-1842:7f3a" vs "...:91c0"), so
// their columns elide from the left: what is cut is the prefix every row shares.
#pragma once

#include <initializer_list>

class QAbstractItemView;

namespace idem::admin {

void elideFromLeft(QAbstractItemView* view, std::initializer_list<int> columns);

}  // namespace idem::admin

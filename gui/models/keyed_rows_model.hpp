// A table model whose rows have identities (an idempotency key, a row id). A refresh hands it the
// new list and it turns the difference into removes, moves, inserts and dataChanged, never a reset,
// so the operator's selection, current row and scroll position survive every refresh (a settled
// record moving to the top of "updated, newest first" keeps its selection: it is moved, not
// removed and re-inserted). Its columns are its titles(): how many, and the header's text.
#pragma once

#include <QAbstractTableModel>
#include <span>
#include <unordered_set>
#include <vector>

#include "models/column_titles.hpp"

namespace idem::admin {

template <typename Row, typename Key>
class KeyedRowsModel : public QAbstractTableModel {
 public:
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const final {
    return parent.isValid() ? 0 : static_cast<int>(titles().size());
  }
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override {
    return columnTitle(titles(), section, orientation, role);
  }

  // The index checks for every model; each answers for one row and column in cellData().
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final {
    if (!this->checkIndex(index, QAbstractItemModel::CheckIndexOption::IndexIsValid |
                                     QAbstractItemModel::CheckIndexOption::ParentIsInvalid)) {
      return {};
    }
    return cellData(rows_[static_cast<std::size_t>(index.row())], index.column(), role);
  }

  const Row* rowAt(int row) const {
    return row >= 0 && row < static_cast<int>(rows_.size()) ? &rows_[static_cast<std::size_t>(row)]
                                                            : nullptr;
  }
  const std::vector<Row>& rows() const { return rows_; }

 protected:
  // One title per column in the order of the model's Columns enum (columnTitles<ColumnCount>()).
  virtual std::span<const char* const> titles() const = 0;
  virtual QVariant cellData(const Row& row, int column, int role) const = 0;
  virtual Key keyOf(const Row& row) const = 0;
  virtual bool sameContent(const Row& a, const Row& b) const = 0;

  bool containsKey(const Key& key) const { return present_.count(key) != 0; }

  // Appends a page. A row already shown (it changed and moved past the page boundary while the
  // operator scrolled) is skipped here; the next refresh puts it where it now belongs.
  void appendRows(std::vector<Row> more) {
    std::erase_if(more, [this](const Row& r) { return !present_.insert(keyOf(r)).second; });
    if (more.empty()) return;
    const int first = static_cast<int>(rows_.size());
    beginInsertRows({}, first, first + static_cast<int>(more.size()) - 1);
    for (Row& r : more) rows_.push_back(std::move(r));
    endInsertRows();
  }

  void resetRows() {
    beginResetModel();
    rows_.clear();
    present_.clear();
    endResetModel();
  }

  // Makes rows_ equal to `next` (a repeated key keeps its first row).
  void replaceRows(std::vector<Row> next) {
    std::unordered_set<Key> wanted;
    wanted.reserve(next.size());
    std::erase_if(next, [&](const Row& r) { return !wanted.insert(keyOf(r)).second; });

    // 1. Rows that are gone, in contiguous runs from the bottom so indexes stay valid.
    for (int i = static_cast<int>(rows_.size()) - 1; i >= 0;) {
      if (wanted.count(keyOf(rows_[static_cast<std::size_t>(i)])) != 0) {
        --i;
        continue;
      }
      int first = i;
      while (first > 0 && wanted.count(keyOf(rows_[static_cast<std::size_t>(first - 1)])) == 0)
        --first;
      beginRemoveRows({}, first, i);
      rows_.erase(rows_.begin() + first, rows_.begin() + i + 1);
      endRemoveRows();
      i = first - 1;
    }

    // 2. Walk the new order: a row already present further down is moved up, a missing one
    //    inserted. `unplaced` holds the keys of current rows below position i.
    std::unordered_set<Key> unplaced;
    unplaced.reserve(rows_.size());
    for (const Row& r : rows_) unplaced.insert(keyOf(r));
    const int columns = columnCount();
    for (std::size_t i = 0; i < next.size(); ++i) {
      const Key key = keyOf(next[i]);
      const int at = static_cast<int>(i);
      if (i < rows_.size() && keyOf(rows_[i]) == key) {
        unplaced.erase(key);
        updateRow(at, std::move(next[i]), columns);
        continue;
      }
      int from = -1;
      for (std::size_t j = i + 1; unplaced.count(key) != 0 && j < rows_.size(); ++j) {
        if (keyOf(rows_[j]) == key) {
          from = static_cast<int>(j);
          break;
        }
      }
      if (from >= 0) {
        beginMoveRows({}, from, from, {}, at);
        Row moving = std::move(rows_[static_cast<std::size_t>(from)]);
        rows_.erase(rows_.begin() + from);
        rows_.insert(rows_.begin() + at, std::move(moving));
        endMoveRows();
        unplaced.erase(key);
        updateRow(at, std::move(next[i]), columns);
        continue;
      }
      // A run of new rows goes in with one insert.
      std::size_t end = i + 1;
      while (end < next.size() && unplaced.count(keyOf(next[end])) == 0) ++end;
      beginInsertRows({}, at, at + static_cast<int>(end - i) - 1);
      for (std::size_t k = i; k < end; ++k) {
        rows_.insert(rows_.begin() + static_cast<std::ptrdiff_t>(k), std::move(next[k]));
      }
      endInsertRows();
      i = end - 1;
    }
    present_ = std::move(wanted);
  }

  std::vector<Row> rows_;

 private:
  std::unordered_set<Key> present_;

  void updateRow(int at, Row&& fresh, int columns) {
    Row& current = rows_[static_cast<std::size_t>(at)];
    if (sameContent(current, fresh)) return;
    current = std::move(fresh);
    emit dataChanged(index(at, 0), index(at, columns - 1));
  }
};

}  // namespace idem::admin

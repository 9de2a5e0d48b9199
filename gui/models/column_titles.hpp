// A table's header titles as one list in the order of its Columns enum, instead of a switch per
// model: columnTitles<ColumnCount>() refuses to compile unless every column has exactly one.
#pragma once

#include <QString>
#include <QVariant>
#include <array>
#include <cstddef>
#include <span>

namespace idem::admin {

template <std::size_t Columns, typename... Titles>
constexpr std::array<const char*, Columns> columnTitles(Titles... titles) {
  static_assert(sizeof...(Titles) == Columns, "one title per column, in the Columns enum's order");
  return {titles...};
}

// The horizontal header's text for `section` (nothing for other roles, orientations, sections).
inline QVariant columnTitle(std::span<const char* const> titles, int section,
                            Qt::Orientation orientation, int role) {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
      section >= static_cast<int>(titles.size())) {
    return {};
  }
  return QString::fromUtf8(titles[static_cast<std::size_t>(section)]);
}

}  // namespace idem::admin

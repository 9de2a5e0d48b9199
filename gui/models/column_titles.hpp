// A table's header titles as one list in the order of its Columns enum, instead of a switch per
// model: columnTitles() counts them, so each model can static_assert that every column has one.
#pragma once

#include <QString>
#include <QVariant>
#include <array>

namespace idem::admin {

template <typename... Titles>
constexpr std::array<const char*, sizeof...(Titles)> columnTitles(Titles... titles) {
  return {titles...};
}

// The horizontal header's text for `section` (nothing for other roles, orientations, sections).
template <std::size_t N>
QVariant columnTitle(const std::array<const char*, N>& titles, int section,
                     Qt::Orientation orientation, int role) {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
      section >= static_cast<int>(N)) {
    return {};
  }
  return QString::fromUtf8(titles[static_cast<std::size_t>(section)]);
}

}  // namespace idem::admin

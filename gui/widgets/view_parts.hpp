// The parts most tabs share, for a registration's factory: a page that re-reads on refresh() and
// exports its model() by the model's ExportRole, and a countChanged(int) shown in the tab's title.
#pragma once

#include <QObject>
#include <QString>
#include <type_traits>
#include <utility>

#include "models/csv_writer.hpp"
#include "widgets/main_window.hpp"
#include "widgets/view_registry.hpp"

namespace idem::admin {

template <typename V>
View tableView(V* view, QString exportName) {
  using Model = std::remove_pointer_t<decltype(view->model())>;
  return View{
      .page = view,
      .refresh = [view](bool) { view->refresh(); },
      .exportCsv =
          [view](QIODevice& out) { return writeCsv(*view->model(), out, Model::ExportRole); },
      .exportName = std::move(exportName),
  };
}

// The view's row count joins its tab's title: "Overcharges (3)".
template <typename V>
void countInTitle(const ViewContext& context, V* view) {
  MainWindow* window = &context.window;
  QObject::connect(view, &V::countChanged, window,
                   [window, view](int rows) { window->setTabCount(view, rows); });
}

}  // namespace idem::admin

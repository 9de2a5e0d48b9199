// Text from the database and the domain types (UTF-8 in std::string or std::string_view) as a
// QString: one conversion, so every table, pane and dialog reads the same bytes the same way.
#pragma once

#include <QString>
#include <string_view>

namespace idem::admin {

// Exactly the view's bytes: no terminating NUL needed, embedded ones kept.
QString fromUtf8(std::string_view s);

}  // namespace idem::admin

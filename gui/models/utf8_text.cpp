#include "models/utf8_text.hpp"

namespace idem::admin {

QString fromUtf8(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

}  // namespace idem::admin

#include "idem/vocabulary.hpp"

namespace idem {

UnknownValue::UnknownValue(std::string_view vocabulary, std::string_view value,
                           const std::string& expected)
    : std::invalid_argument("unknown " + std::string(vocabulary) + " '" + std::string(value) +
                            "': expected " + expected) {}

}  // namespace idem

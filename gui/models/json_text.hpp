// Payloads as an operator reads them: pretty-printed JSON, or the raw text when it is not JSON.
#pragma once

#include <QString>
#include <optional>
#include <string>

namespace idem::admin {

// Indented JSON; "(none)" for a missing payload; the text unchanged if it does not parse.
QString prettyJson(const std::optional<std::string>& json);

// One line, for table cells: compact JSON, cut to maxChars with an ellipsis.
QString compactJson(const std::optional<std::string>& json, int maxChars = 120);

}  // namespace idem::admin

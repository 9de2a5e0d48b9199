// Grafana template variables in query text: $name, ${name}, ${name:format} and the deprecated
// [[name]]. Used to check that queries filter by $job and $instance, and to fill the variables in
// so that the expressions can be run against a real Prometheus (--print-exprs).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idemwatch::dashlint {

struct VariableRef {
  std::size_t begin = 0;
  std::size_t end = 0;  // one past the reference
  std::string name;
};

// Every reference in `text`, in order. `$1` (a regex back reference) is not a variable.
std::vector<VariableRef> findVariableRefs(std::string_view text);

// `text` with every reference replaced by its value from `values`; names without a value are
// left as written and added to `unset`.
std::string substituteVariables(std::string_view text,
                                const std::map<std::string, std::string>& values,
                                std::set<std::string>& unset);

// A PromQL expression on one line: # comments dropped, runs of whitespace (newlines included)
// outside string literals become one space.
std::string toOneLine(std::string_view expr);

}  // namespace idemwatch::dashlint

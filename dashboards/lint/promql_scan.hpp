// A lexical scan of a PromQL expression, enough to lint dashboards: which series selectors it
// holds (metric name and label matchers) and which range windows ([...]) it uses. It is not a
// parser: promtool and Prometheus validate the syntax; this finds what the conventions are about.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace idemwatch::dashlint {

struct LabelMatcher {
  std::string label;
  std::string op;  // =, !=, =~, !~
  std::string value;
};

struct Selector {
  std::string metric;  // empty for a bare {…} selector
  std::vector<LabelMatcher> matchers;
  std::string text;  // as written, for messages
};

struct PromqlScan {
  std::vector<Selector> selectors;
  std::vector<std::string> ranges;  // the text between [ and ], trimmed
  std::vector<std::string> errors;  // what the scan could not make sense of
};

PromqlScan scanPromql(std::string_view expr);

// True if a matcher on `label` selects by the dashboard variable `variable`
// ($variable, ${variable}, ${variable:format} or [[variable]]) with = or =~.
bool filtersByVariable(const Selector& selector, std::string_view label, std::string_view variable);

}  // namespace idemwatch::dashlint

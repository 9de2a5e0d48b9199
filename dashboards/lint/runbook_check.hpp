// Every alert of the Prometheus rule files carries what on-call needs (label severity;
// annotations summary, description with the value, runbook_url), and its runbook_url points to an
// anchor that exists in runbooks.md: the alert's own section.
//
// The rule files are read with yaml-cpp as Prometheus reads them (groups, each with rules), so
// flow style, anchors and block scalars read as they mean; promtool check rules validates them
// as rules and PromQL.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dashboard_lint.hpp"

namespace idemwatch::dashlint {

struct AlertRule {
  std::string name;
  int line = 0;
  // "expr", "for", "labels.severity", "annotations.summary", …: scalars, block scalars folded
  // into one line.
  std::map<std::string, std::string> fields;
};

// A rule file that is not YAML, or not shaped as groups of rules; what() starts "line N".
class RuleFileError : public std::runtime_error {
 public:
  RuleFileError(int line, const std::string& what);
  int line() const { return line_; }

 private:
  int line_;
};

// The alerting rules (not the recording ones), in file order. Throws RuleFileError.
std::vector<AlertRule> parseAlertRules(std::string_view yaml);

// The anchors a Markdown file offers: GitHub's slugs of its headings (outside code fences, with
// -1, -2… for repeats) and explicit <a id="…"> / <a name="…">.
std::set<std::string> markdownAnchors(std::string_view markdown);

// GitHub's anchor for a heading text.
std::string headingSlug(std::string_view heading);

std::vector<Problem> checkAlertRules(const std::string& rulesPath, std::string_view rulesYaml,
                                     const std::string& runbookPath,
                                     const std::set<std::string>& anchors);

}  // namespace idemwatch::dashlint

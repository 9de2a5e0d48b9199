// Unit tests of the linter's building blocks: the PromQL scan, the variable substitution behind
// --print-exprs, the rule-file reader and the runbook anchors. Plain C++: no framework needed.
#include <iostream>
#include <string>
#include <vector>

#include "dashboard_lint.hpp"
#include "promql_scan.hpp"
#include "runbook_check.hpp"
#include "template_vars.hpp"

namespace {

using namespace idemwatch::dashlint;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::cerr << "FAIL: " << what << "\n";
  }
}

template <typename A, typename B>
void checkEqual(const A& got, const B& expected, const std::string& what) {
  if (!(got == expected)) {
    ++failures;
    std::cerr << "FAIL: " << what << "\n  got:      " << got << "\n  expected: " << expected
              << "\n";
  }
}

void scanFindsSelectorsButNotFunctionsKeywordsOrLabelLists() {
  const PromqlScan scan = scanPromql(R"(
    sum by (biz_type) (rate(idempotency_requests_total{job=~"$job", outcome=~"replayed|in_progress"}[$__rate_interval]))
    / on (biz_type) group_left ()
    sum without (le) (rate(idempotency_requests_total{job=~"$job"}[5m] offset 1h)) or vector(0)
    # a comment with not_a_metric{x="y"}
    and histogram_quantile(0.99, sum(rate(x_bucket[1m])) by (le)) > bool 1e-9)");
  checkEqual(scan.selectors.size(), std::size_t{3}, "three selectors");
  if (scan.selectors.size() == 3) {
    checkEqual(scan.selectors[0].metric, std::string("idempotency_requests_total"), "first metric");
    checkEqual(scan.selectors[0].matchers.size(), std::size_t{2}, "two matchers");
    checkEqual(scan.selectors[0].matchers[1].value, std::string("replayed|in_progress"),
               "regex value");
    checkEqual(scan.selectors[2].metric, std::string("x_bucket"), "bucket metric");
  }
  checkEqual(scan.ranges.size(), std::size_t{3}, "three ranges");
  if (scan.ranges.size() == 3) checkEqual(scan.ranges[1], std::string("5m"), "fixed range");
  check(scan.errors.empty(), "no scan errors");
}

void scanSeesBareSelectorsAndBadMatchers() {
  const PromqlScan bare = scanPromql(R"({__name__=~"idempotency_.*", job="x"})");
  checkEqual(bare.selectors.size(), std::size_t{1}, "bare selector");
  const PromqlScan bad = scanPromql(R"(foo{job=})");
  check(!bad.errors.empty(), "matcher without value is an error");
}

void filtersByVariableAcceptsEveryForm() {
  for (const char* expr : {R"(up{job=~"$job"})", R"(up{job="${job}"})",
                           R"(up{job=~"${job:regex}"})", R"(up{job=~"[[job]]"})"}) {
    const PromqlScan scan = scanPromql(expr);
    check(!scan.selectors.empty() && filtersByVariable(scan.selectors[0], "job", "job"), expr);
  }
  for (const char* expr :
       {R"(up{job=~"$jobs"})", R"(up{job!~"$job"})", R"(up{instance=~"$job"})", R"(up)"}) {
    const PromqlScan scan = scanPromql(expr);
    check(!scan.selectors.empty() && !filtersByVariable(scan.selectors[0], "job", "job"),
          std::string("not filtered: ") + expr);
  }
}

void substitutionFillsEveryFormAndReportsUnset() {
  std::set<std::string> unset;
  const std::string out = substituteVariables(
      R"(rate(x{job=~"$job",instance=~"${instance}",a=~"[[job]]",b="${job:regex}",c="$1"}[$__rate_interval]) $missing)",
      {{"job", "idemwatch"}, {"instance", "localhost:9477"}, {"__rate_interval", "1m"}}, unset);
  checkEqual(
      out,
      std::string(
          R"(rate(x{job=~"idemwatch",instance=~"localhost:9477",a=~"idemwatch",b="idemwatch",c="$1"}[1m]) $missing)"),
      "substitution");
  checkEqual(unset.size(), std::size_t{1}, "one unset variable");
  check(unset.count("missing") == 1, "$missing is unset");
}

void oneLineDropsCommentsAndKeepsStrings() {
  checkEqual(toOneLine("sum(\n  rate(x{a=\"two  spaces # kept\"}[1m])  # why\n)\n"),
             std::string("sum( rate(x{a=\"two  spaces # kept\"}[1m]) )"), "one line");
}

void ruleReaderFoldsBlockScalars() {
  const std::vector<AlertRule> alerts = parseAlertRules(R"(groups:
  - name: g
    rules:
      - record: a:b:c
        expr: x
      - alert: First
        expr: |
          up
          == 0
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: 'Quoted summary.'
          description: >-
            Folded {{ $value }}
            text.
          runbook_url: https://example.org/runbooks.md#first
      - alert: "Second"
        expr: up
)");
  checkEqual(alerts.size(), std::size_t{2}, "two alerts");
  if (alerts.size() != 2) return;
  checkEqual(alerts[0].fields.at("expr"), std::string("up == 0"), "folded expr");
  checkEqual(alerts[0].fields.at("labels.severity"), std::string("critical"), "severity");
  checkEqual(alerts[0].fields.at("annotations.summary"), std::string("Quoted summary."), "summary");
  checkEqual(alerts[0].fields.at("annotations.description"),
             std::string("Folded {{ $value }} text."), "description");
  checkEqual(alerts[1].name, std::string("Second"), "quoted name");
  check(alerts[1].fields.count("labels.severity") == 0, "second has no severity");
}

// What a YAML library reads and a line scanner did not: flow style, anchors and aliases, a rule
// whose first key is not "alert", comments after values.
void ruleReaderReadsFlowStyleAndAliases() {
  const std::vector<AlertRule> alerts = parseAlertRules(R"(groups:
  - name: g
    rules:
      - {alert: Flow, expr: up == 0, labels: {severity: warning}, annotations: &notes {summary: S}}
      - expr: up  # the expression first
        alert: Aliased
        annotations: *notes
)");
  checkEqual(alerts.size(), std::size_t{2}, "two alerts in flow and block style");
  if (alerts.size() != 2) return;
  checkEqual(alerts[0].name, std::string("Flow"), "flow-style name");
  checkEqual(alerts[0].fields.at("labels.severity"), std::string("warning"), "flow severity");
  checkEqual(alerts[1].name, std::string("Aliased"), "name after expr");
  checkEqual(alerts[1].line, 6, "the rule's line");
  checkEqual(alerts[1].fields.at("expr"), std::string("up"), "comment dropped");
  checkEqual(alerts[1].fields.at("annotations.summary"), std::string("S"), "alias resolved");
}

void ruleReaderNamesTheLineOfBadYaml() {
  try {
    parseAlertRules("groups:\n  - name: g\n    rules: [\n");
    check(false, "unterminated flow list refused");
  } catch (const RuleFileError& e) {
    check(std::string(e.what()).find("not valid YAML") != std::string::npos, e.what());
  }
  const std::vector<Problem> problems = checkAlertRules(
      "bad.rules.yml", "groups:\n  - name: g\n    rules: {a: [}\n", "runbooks.md", {});
  checkEqual(problems.size(), std::size_t{1}, "one problem for bad YAML");
  if (problems.size() == 1) {
    checkEqual(problems[0].file, std::string("bad.rules.yml"), "the file named");
    checkEqual(problems[0].where, std::string("line 3"), "the line named");
  }
  try {
    parseAlertRules("groups:\n  - name: g\n    rules: up\n");
    check(false, "rules that are not a list refused");
  } catch (const RuleFileError& e) {
    checkEqual(e.line(), 3, "line of the scalar rules");
  }
}

void anchorsFollowGithubSlugs() {
  const std::set<std::string> anchors = markdownAnchors(R"(# Runbooks
## IdempotencyDuplicateFundFlow
### What to do: `idemctl settle`
## What to do: `idemctl settle`
```
## not a heading
```
<a id="custom-anchor"></a>
)");
  for (const char* a : {"runbooks", "idempotencyduplicatefundflow", "what-to-do-idemctl-settle",
                        "what-to-do-idemctl-settle-1", "custom-anchor"}) {
    check(anchors.count(a) == 1, std::string("anchor ") + a);
  }
  check(anchors.count("not-a-heading") == 0, "no anchor inside a code fence");
}

}  // namespace

int main() {
  scanFindsSelectorsButNotFunctionsKeywordsOrLabelLists();
  scanSeesBareSelectorsAndBadMatchers();
  filtersByVariableAcceptsEveryForm();
  substitutionFillsEveryFormAndReportsUnset();
  oneLineDropsCommentsAndKeepsStrings();
  ruleReaderFoldsBlockScalars();
  ruleReaderReadsFlowStyleAndAliases();
  ruleReaderNamesTheLineOfBadYaml();
  anchorsFollowGithubSlugs();
  if (failures > 0) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "all checks passed\n";
  return 0;
}

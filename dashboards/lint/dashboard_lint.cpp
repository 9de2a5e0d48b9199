#include "dashboard_lint.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include "promql_scan.hpp"
#include "template_vars.hpp"

namespace idemwatch::dashlint {
namespace {

using nlohmann::json;

constexpr int kMinSchemaVersion = 36;  // Grafana 9.0
constexpr int kMaxSchemaVersion = 39;  // Grafana 10.x/11.0
constexpr double kHitRatioThreshold = 0.0005;
constexpr double kRetryRatioThreshold = 0.1;

constexpr std::array<std::string_view, 7> kPanelTypes = {"timeseries", "stat", "gauge", "table",
                                                         "bargauge",   "text", "row"};
// Angular-era panels that Grafana 10 no longer renders, and what replaced them.
const std::map<std::string, std::string, std::less<>> kDeprecatedPanelTypes = {
    {"graph", "timeseries"},
    {"singlestat", "stat"},
    {"table-old", "table"},
    {"grafana-piechart-panel", "piechart"},
    {"grafana-singlestat-panel", "stat"}};

std::string str(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool isBlank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

const json* find(const json& object, std::initializer_list<const char*> path) {
  const json* node = &object;
  for (const char* key : path) {
    if (!node->is_object()) return nullptr;
    const auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

// "$datasource" or "${datasource}", as a string or as the uid of a {type, uid} reference.
bool refersToVariable(const json& ds, const std::string& variable) {
  const auto isRef = [&](const std::string& s) {
    return s == "$" + variable || s == "${" + variable + "}";
  };
  if (ds.is_string()) return isRef(ds.get<std::string>());
  if (ds.is_object()) {
    const std::string type = str(ds, "type");
    return isRef(str(ds, "uid")) && (type.empty() || type == "prometheus");
  }
  return false;
}

std::string panelWhere(const json& panel) {
  std::string where = "panel \"" + str(panel, "title") + "\"";
  if (const auto id = panel.find("id"); id != panel.end() && id->is_number_integer()) {
    where += " (id " + std::to_string(id->get<long long>()) + ")";
  }
  return where;
}

void forEachPanel(const json& dashboard, const std::function<void(const json&)>& visit) {
  const auto panels = dashboard.find("panels");
  if (panels == dashboard.end() || !panels->is_array()) return;
  for (const json& panel : *panels) {
    if (!panel.is_object()) continue;
    visit(panel);
    if (const auto nested = panel.find("panels"); nested != panel.end() && nested->is_array()) {
      for (const json& inner : *nested) {
        if (inner.is_object()) visit(inner);
      }
    }
  }
}

std::vector<double> thresholdValues(const json& panel, bool redOnly) {
  std::vector<double> values;
  const json* steps = find(panel, {"fieldConfig", "defaults", "thresholds", "steps"});
  if (steps == nullptr || !steps->is_array()) return values;
  for (const json& step : *steps) {
    const auto value = step.find("value");
    if (value == step.end() || !value->is_number()) continue;
    if (redOnly && str(step, "color").find("red") == std::string::npos) continue;
    values.push_back(value->get<double>());
  }
  return values;
}

bool hasStepAt(const std::vector<double>& values, double at) {
  return std::any_of(values.begin(), values.end(),
                     [at](double v) { return std::fabs(v - at) < 1e-12; });
}

class DashboardLinter {
 public:
  explicit DashboardLinter(const DashboardFile& file) : file_(file), d_(file.model) {}

  std::vector<Problem> run() {
    if (!d_.is_object()) {
      report("dashboard", "the file is not a dashboard JSON object");
      return std::move(problems_);
    }
    dashboardWhere_ = "dashboard \"" + str(d_, "title") + "\"";
    checkDashboard();
    checkVariables();
    std::set<long long> panelIds;
    forEachPanel(d_, [&](const json& panel) { checkPanel(panel, panelIds); });
    return std::move(problems_);
  }

 private:
  void report(const std::string& where, const std::string& what) {
    problems_.push_back({file_.path, where, what});
  }
  void reportDashboard(const std::string& what) { report(dashboardWhere_, what); }

  void checkDashboard() {
    static const std::regex kUid("[A-Za-z0-9_-]{1,40}");
    const std::string uid = str(d_, "uid");
    if (uid.empty()) {
      reportDashboard("has no uid; set a stable one so links and provisioning survive re-imports");
    } else if (!std::regex_match(uid, kUid)) {
      reportDashboard("uid \"" + uid + "\" must be 1-40 characters of A-Z a-z 0-9 _ -");
    }
    if (isBlank(str(d_, "title"))) reportDashboard("has no title");
    if (const auto id = d_.find("id"); id != d_.end() && !id->is_null()) {
      reportDashboard("has \"id\": " + id->dump() + "; set it to null (Grafana assigns ids)");
    }
    const auto schema = d_.find("schemaVersion");
    if (schema == d_.end() || !schema->is_number_integer()) {
      reportDashboard("has no schemaVersion");
    } else if (const int v = schema->get<int>(); v < kMinSchemaVersion || v > kMaxSchemaVersion) {
      reportDashboard("schemaVersion " + std::to_string(v) + " is outside " +
                      std::to_string(kMinSchemaVersion) + ".." + std::to_string(kMaxSchemaVersion) +
                      " (Grafana 9/10)");
    }
    if (d_.contains("rows")) reportDashboard("uses the pre-Grafana-5 \"rows\" layout; use panels");
    if (d_.dump().find("${DS_") != std::string::npos) {
      reportDashboard(
          "contains an import placeholder ${DS_…}, which provisioning cannot resolve; "
          "use the datasource variable");
    }
  }

  void checkVariables() {
    const json* list = find(d_, {"templating", "list"});
    if (list == nullptr || !list->is_array()) {
      reportDashboard("has no templating variables (needs datasource, job and instance)");
      return;
    }
    for (const json& v : *list) {
      if (str(v, "type") == "datasource") {
        dsVariable_ = str(v, "name");
        if (str(v, "query") != "prometheus") {
          reportDashboard("datasource variable $" + dsVariable_ +
                          " must have query \"prometheus\"");
        }
        break;
      }
    }
    if (dsVariable_.empty()) {
      reportDashboard("has no datasource variable (type \"datasource\", query \"prometheus\")");
    }
    std::map<std::string, const json*> byName;
    for (const json& v : *list) {
      byName[str(v, "name")] = &v;
      if (str(v, "type") != "query") continue;
      const std::string where = dashboardWhere_ + ", variable $" + str(v, "name");
      const auto ds = v.find("datasource");
      if (!dsVariable_.empty() && (ds == v.end() || !refersToVariable(*ds, dsVariable_))) {
        report(where, "must use the datasource variable ${" + dsVariable_ + "}");
      }
      if (isBlank(variableQuery(v))) report(where, "has no query");
    }
    for (const char* name : {"job", "instance"}) {
      const auto it = byName.find(name);
      if (it == byName.end()) {
        reportDashboard(std::string("has no $") + name + " variable");
      } else if (str(*it->second, "type") != "query") {
        reportDashboard(std::string("variable $") + name + " must be a query variable");
      }
    }
    if (const auto it = byName.find("instance"); it != byName.end()) {
      const std::vector<VariableRef> refs = findVariableRefs(variableQuery(*it->second));
      if (std::none_of(refs.begin(), refs.end(),
                       [](const VariableRef& r) { return r.name == "job"; })) {
        report(dashboardWhere_ + ", variable $instance", "its query must be filtered by $job");
      }
    }
  }

  static std::string variableQuery(const json& v) {
    const auto q = v.find("query");
    if (q == v.end()) return {};
    if (q->is_string()) return q->get<std::string>();
    return str(*q, "query");
  }

  void checkPanel(const json& panel, std::set<long long>& panelIds) {
    const std::string where = panelWhere(panel);
    const std::string type = str(panel, "type");
    if (const auto id = panel.find("id"); id == panel.end() || !id->is_number_integer()) {
      report(where, "has no integer id");
    } else if (!panelIds.insert(id->get<long long>()).second) {
      report(where, "reuses the panel id of another panel");
    }
    if (isBlank(str(panel, "title"))) report(where, "has no title");
    if (!panel.contains("gridPos")) report(where, "has no gridPos");
    if (const auto old = kDeprecatedPanelTypes.find(type); old != kDeprecatedPanelTypes.end()) {
      report(where, "uses the deprecated panel type \"" + type + "\"; use " + old->second);
      return;
    }
    if (std::find(kPanelTypes.begin(), kPanelTypes.end(), type) == kPanelTypes.end()) {
      report(where, "has panel type \"" + type +
                        "\"; use timeseries, stat, gauge, table, bargauge "
                        "or text");
      return;
    }
    if (type == "row") return;
    if (isBlank(str(panel, "description"))) {
      report(where, "has no description; say what it shows and what to do about it");
    }
    if (type == "text") return;

    const json* unit = find(panel, {"fieldConfig", "defaults", "unit"});
    if (unit == nullptr || !unit->is_string() || isBlank(unit->get<std::string>())) {
      report(where, "has no unit (fieldConfig.defaults.unit)");
    }
    const auto ds = panel.find("datasource");
    if (!dsVariable_.empty() && (ds == panel.end() || !refersToVariable(*ds, dsVariable_))) {
      report(where, "must use the datasource variable ${" + dsVariable_ + "}");
    }
    checkTargets(panel, where);
  }

  void checkTargets(const json& panel, const std::string& where) {
    const auto targets = panel.find("targets");
    if (targets == panel.end() || !targets->is_array() || targets->empty()) {
      report(where, "has no queries");
      return;
    }
    std::set<std::string> refIds;
    std::string allExprs;
    for (const json& target : *targets) {
      const std::string refId = str(target, "refId");
      const std::string qwhere = where + ", query " + (refId.empty() ? "?" : refId);
      if (refId.empty()) report(qwhere, "has no refId");
      if (!refId.empty() && !refIds.insert(refId).second) report(qwhere, "reuses refId " + refId);
      if (const auto ds = target.find("datasource");
          ds != target.end() && !dsVariable_.empty() && !refersToVariable(*ds, dsVariable_)) {
        report(qwhere, "must use the datasource variable ${" + dsVariable_ + "}");
      }
      const std::string expr = str(target, "expr");
      if (isBlank(expr)) {
        report(qwhere, "has no expr");
        continue;
      }
      allExprs += expr + "\n";
      checkExpr(expr, qwhere);
    }
    checkFigureThresholds(panel, where, allExprs);
  }

  void checkExpr(const std::string& expr, const std::string& where) {
    const PromqlScan scan = scanPromql(expr);
    for (const std::string& error : scan.errors)
      report(where, "cannot scan the expression: " + error);
    for (const std::string& range : scan.ranges) {
      if (range != "$__rate_interval" && range != "${__rate_interval}") {
        report(where, "uses the range [" + range + "]; use [$__rate_interval]");
      }
    }
    if (scan.selectors.empty()) report(where, "selects no series");
    for (const Selector& sel : scan.selectors) {
      for (const char* label : {"job", "instance"}) {
        if (!filtersByVariable(sel, label, label)) {
          report(where, "selector " + toOneLine(sel.text) + " is not filtered by " + label +
                            "=~\"$" + label + "\"");
        }
      }
    }
  }

  // The three figures: hit ratio warn below 0.0005, retry-trigger ratio warn above 0.1,
  // duplicate fund flows red above 0.
  void checkFigureThresholds(const json& panel, const std::string& where,
                             const std::string& exprs) {
    const bool isRatio = exprs.find('/') != std::string::npos;
    const bool hitRatio = isRatio && (exprs.find("replayed|in_progress") != std::string::npos ||
                                      exprs.find("in_progress|replayed") != std::string::npos);
    const bool retryRatio = isRatio && exprs.find("source!=\"initial\"") != std::string::npos;
    const bool duplicates =
        exprs.find("idempotency_duplicate_fund_flows_total") != std::string::npos;
    if (hitRatio && !hasStepAt(thresholdValues(panel, false), kHitRatioThreshold)) {
      report(where, "shows the hit ratio but has no threshold step at 0.0005 (warn below 0.05%)");
    }
    if (retryRatio && !hasStepAt(thresholdValues(panel, false), kRetryRatioThreshold)) {
      report(where,
             "shows the retry-trigger ratio but has no threshold step at 0.1 (warn above 10%)");
    }
    if (duplicates) {
      const std::vector<double> red = thresholdValues(panel, true);
      if (std::none_of(red.begin(), red.end(), [](double v) { return v > 0 && v <= 1; })) {
        report(where,
               "shows duplicate fund flows but has no red threshold step above 0 (at most 1)");
      }
    }
  }

  const DashboardFile& file_;
  const json& d_;
  std::string dashboardWhere_ = "dashboard";
  std::string dsVariable_;
  std::vector<Problem> problems_;
};

}  // namespace

std::vector<Problem> lintDashboard(const DashboardFile& dashboard) {
  return DashboardLinter(dashboard).run();
}

std::vector<Problem> lintDashboards(const std::vector<DashboardFile>& dashboards) {
  std::vector<Problem> problems;
  std::map<std::string, std::string> uids;  // uid -> first file
  for (const DashboardFile& d : dashboards) {
    std::vector<Problem> own = lintDashboard(d);
    problems.insert(problems.end(), own.begin(), own.end());
    const std::string uid = str(d.model, "uid");
    if (uid.empty()) continue;
    const auto [it, inserted] = uids.emplace(uid, d.path);
    if (!inserted) {
      problems.push_back({d.path, "dashboard \"" + str(d.model, "title") + "\"",
                          "uid \"" + uid + "\" is also the uid of " + it->second});
    }
  }
  return problems;
}

std::vector<PanelQuery> panelQueries(const nlohmann::json& dashboard) {
  std::vector<PanelQuery> queries;
  if (!dashboard.is_object()) return queries;
  forEachPanel(dashboard, [&](const json& panel) {
    const auto targets = panel.find("targets");
    if (targets == panel.end() || !targets->is_array()) return;
    for (const json& target : *targets) {
      const std::string expr = str(target, "expr");
      if (!isBlank(expr)) queries.push_back({str(panel, "title"), str(target, "refId"), expr});
    }
  });
  return queries;
}

}  // namespace idemwatch::dashlint

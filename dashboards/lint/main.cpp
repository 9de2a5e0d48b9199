// idemwatch-dashboard-lint: checks the conventions of the Grafana dashboards and the alerts'
// runbook links, and prints the dashboards' queries ready to run against Prometheus.
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dashboard_lint.hpp"
#include "idem/command_line.hpp"
#include "runbook_check.hpp"
#include "template_vars.hpp"

namespace {

using namespace idemwatch::dashlint;

constexpr int kExitProblems = 1;
constexpr int kExitUsage = 2;

constexpr const char* kModes = R"(modes:
  idemwatch-dashboard-lint DASHBOARD.json...
      Lint the dashboards: one line per problem (file: where: what), exit 1 if any.
  idemwatch-dashboard-lint --print-exprs [--with-source] --set NAME=VALUE... DASHBOARD.json...
      Print every panel query, one per line, with $NAME, ${NAME}, ${NAME:format} and [[NAME]]
      filled in, e.g. --set job=idemwatch --set instance=localhost:9477 --set __rate_interval=1m.
      With --with-source: FILE<TAB>PANEL TITLE<TAB>REFID<TAB>EXPR.
      Exit 1 if a variable has no value.
  idemwatch-dashboard-lint --check-runbooks RULES.yml... RUNBOOKS.md
      Check that every alert has severity, summary, description (with $value) and a runbook_url
      whose anchor is the alert's own section in RUNBOOKS.md. Exit 1 on any problem.
)";

struct Options {
  enum class Mode { Lint, PrintExprs, CheckRunbooks } mode = Mode::Lint;
  bool withSource = false;
  std::map<std::string, std::string> values;
  std::vector<std::string> files;
};

bool readFile(const std::string& path, std::string& content) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot read the file\n";
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  content = buffer.str();
  return true;
}

[[noreturn]] int usageError(const std::string& message) {
  throw idem::UsageError(message);
}

// False when --help or --version was answered. Throws idem::UsageError.
bool parseOptions(int argc, char** argv, Options& options) {
  idem::CommandLine cli("idemwatch-dashboard-lint", "idemwatch-dashboard-lint [flags] FILE...",
                        kModes);
  cli.flag("print-exprs", "print every panel query instead of linting",
           [&] { options.mode = Options::Mode::PrintExprs; });
  cli.flag("check-runbooks", "check the alerts' runbook links instead of linting",
           [&] { options.mode = Options::Mode::CheckRunbooks; });
  cli.flag("with-source", "with --print-exprs: the file, panel and refId before each query",
           options.withSource);
  cli.each("set", "NAME=VALUE", "with --print-exprs: the value of a dashboard variable",
           [&](const std::string& assignment) {
             const std::size_t eq = assignment.find('=');
             if (eq == std::string::npos || eq == 0) {
               throw idem::badValue("set", "NAME=VALUE", assignment);
             }
             options.values[assignment.substr(0, eq)] = assignment.substr(eq + 1);
           });
  cli.positionals(options.files);
  cli.check([&] {
    if (options.files.empty()) usageError("no files given");
    if (options.withSource && options.mode != Options::Mode::PrintExprs) {
      usageError("--with-source goes with --print-exprs");
    }
  });
  return cli.parse(std::vector<std::string>(argv + 1, argv + argc), std::cout);
}

bool loadDashboards(const std::vector<std::string>& paths, std::vector<DashboardFile>& out) {
  bool ok = true;
  for (const std::string& path : paths) {
    std::string text;
    if (!readFile(path, text)) {
      ok = false;
      continue;
    }
    nlohmann::json model = nlohmann::json::parse(text, nullptr, false);
    if (model.is_discarded()) {
      std::cerr << path << ": not valid JSON\n";
      ok = false;
      continue;
    }
    out.push_back({path, std::move(model)});
  }
  return ok;
}

int lint(const Options& options) {
  std::vector<DashboardFile> dashboards;
  if (!loadDashboards(options.files, dashboards)) return kExitUsage;
  const std::vector<Problem> problems = lintDashboards(dashboards);
  for (const Problem& p : problems) std::cout << p.format() << "\n";
  if (!problems.empty()) {
    std::cerr << problems.size() << " problem(s) in " << dashboards.size() << " dashboard(s)\n";
    return kExitProblems;
  }
  return 0;
}

int printExprs(const Options& options) {
  std::vector<DashboardFile> dashboards;
  if (!loadDashboards(options.files, dashboards)) return kExitUsage;
  std::set<std::string> unset;
  for (const DashboardFile& d : dashboards) {
    for (const PanelQuery& q : panelQueries(d.model)) {
      const std::string expr = toOneLine(substituteVariables(q.expr, options.values, unset));
      if (options.withSource) {
        std::cout << d.path << '\t' << q.panelTitle << '\t' << q.refId << '\t';
      }
      std::cout << expr << '\n';
    }
  }
  if (!unset.empty()) {
    std::string names;
    for (const std::string& name : unset) names += " $" + name;
    std::cerr << "idemwatch-dashboard-lint: no value for" << names
              << "; pass --set NAME=VALUE for each\n";
    return kExitProblems;
  }
  return 0;
}

int checkRunbooks(const Options& options) {
  std::string runbookPath;
  std::vector<std::string> rules;
  for (const std::string& f : options.files) {
    if (f.size() > 3 && f.compare(f.size() - 3, 3, ".md") == 0) {
      if (!runbookPath.empty()) return usageError("give one runbook .md file, not several");
      runbookPath = f;
    } else {
      rules.push_back(f);
    }
  }
  if (runbookPath.empty() || rules.empty()) {
    return usageError("--check-runbooks needs rule files and one runbook .md file");
  }
  std::string markdown;
  if (!readFile(runbookPath, markdown)) return kExitUsage;
  const std::set<std::string> anchors = markdownAnchors(markdown);
  std::vector<Problem> problems;
  std::size_t alerts = 0;
  for (const std::string& path : rules) {
    std::string yaml;
    if (!readFile(path, yaml)) return kExitUsage;
    try {
      alerts += parseAlertRules(yaml).size();
    } catch (const RuleFileError& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
    std::vector<Problem> own = checkAlertRules(path, yaml, runbookPath, anchors);
    problems.insert(problems.end(), own.begin(), own.end());
  }
  if (alerts == 0) {
    std::cout << "no alert found in the rule files\n";
    return kExitProblems;
  }
  for (const Problem& p : problems) std::cout << p.format() << "\n";
  return problems.empty() ? 0 : kExitProblems;
}

}  // namespace

int main(int argc, char** argv) {
  return idem::guardedMain("idemwatch-dashboard-lint", [&] {
    Options options;
    if (!parseOptions(argc, argv, options)) return 0;
    switch (options.mode) {
      case Options::Mode::PrintExprs:
        return printExprs(options);
      case Options::Mode::CheckRunbooks:
        return checkRunbooks(options);
      case Options::Mode::Lint:
        break;
    }
    return lint(options);
  });
}

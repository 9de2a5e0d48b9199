// The conventions every idemwatch Grafana dashboard keeps, checked on its JSON model:
// - a stable uid, no import placeholders (${DS_…}), a Grafana 9/10 schemaVersion (36..39);
// - a datasource variable (type datasource, query prometheus) that every panel, query and query
//   variable uses, and `job` and `instance` query variables (instance chained on $job);
// - on every panel: a title, a description, a unit, Grafana 9/10 panel types only;
// - in every query: each series selector filters by job=~"$job" and instance=~"$instance", and
//   every range window is [$__rate_interval];
// - the three figures carry their thresholds: hit ratio 0.0005 (warn below), retry-trigger ratio
//   0.1 (warn above), duplicate fund flows red above 0.
// Every problem is one line naming the file, the panel and what is wrong.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace idemwatch::dashlint {

struct Problem {
  std::string file;
  std::string where;  // dashboard "…", panel "…" (id N), query A
  std::string what;

  std::string format() const { return file + ": " + where + ": " + what; }
};

struct DashboardFile {
  std::string path;
  nlohmann::json model;
};

struct PanelQuery {
  std::string panelTitle;
  std::string refId;
  std::string expr;
};

// Lints each dashboard, and that no two of them share a uid.
std::vector<Problem> lintDashboards(const std::vector<DashboardFile>& dashboards);

std::vector<Problem> lintDashboard(const DashboardFile& dashboard);

// Every query expression of the dashboard's panels (rows' collapsed panels included), in the
// order of the JSON model.
std::vector<PanelQuery> panelQueries(const nlohmann::json& dashboard);

}  // namespace idemwatch::dashlint

#include "runbook_check.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <regex>
#include <sstream>

namespace idemwatch::dashlint {
namespace {

struct Line {
  int number = 0;
  int indent = 0;
  std::string text;  // without the indentation
};

std::vector<Line> splitLines(std::string_view text) {
  std::vector<Line> lines;
  std::istringstream in{std::string(text)};
  std::string raw;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::size_t first = raw.find_first_not_of(' ');
    Line line;
    line.number = number;
    line.indent = first == std::string::npos ? 0 : static_cast<int>(first);
    line.text = first == std::string::npos ? std::string() : raw.substr(first);
    lines.push_back(std::move(line));
  }
  return lines;
}

int lineOf(const YAML::Node& node) {
  return node.Mark().is_null() ? 0 : node.Mark().line + 1;
}

// A scalar on one line: the lines of a block or multi-line scalar joined by single spaces.
std::string oneLine(const std::string& value) {
  std::string out;
  std::istringstream in(value);
  std::string part;
  while (std::getline(in, part)) {
    const std::size_t first = part.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const std::size_t last = part.find_last_not_of(" \t\r");
    if (!out.empty()) out += ' ';
    out += part.substr(first, last - first + 1);
  }
  return out;
}

// The node under `key` of a mapping, which must be a list (or absent).
YAML::Node listAt(const YAML::Node& map, const char* key, const char* where) {
  const YAML::Node list = map[key];
  if (list && !list.IsNull() && !list.IsSequence())
    throw RuleFileError(lineOf(list), std::string(where) + "." + key + " must be a list");
  return list;
}

std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const std::string_view part : parts) out += part;
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

RuleFileError::RuleFileError(int line, const std::string& what)
    : std::runtime_error("line " + std::to_string(line) + ": " + what), line_(line) {}

std::vector<AlertRule> parseAlertRules(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw RuleFileError(e.mark.line + 1, "not valid YAML: " + e.msg);
  }
  std::vector<AlertRule> alerts;
  if (!root.IsMap()) return alerts;
  for (const YAML::Node& group : listAt(root, "groups", "the file")) {
    if (!group.IsMap()) throw RuleFileError(lineOf(group), "a group must be a mapping");
    for (const YAML::Node& rule : listAt(group, "rules", "a group")) {
      if (!rule.IsMap() || !rule["alert"]) continue;  // a recording rule
      AlertRule alert;
      alert.name = oneLine(rule["alert"].as<std::string>(""));
      alert.line = lineOf(rule["alert"]);
      for (const auto& entry : rule) {
        const std::string key = entry.first.as<std::string>("");
        if (entry.second.IsScalar()) {
          alert.fields[key] = oneLine(entry.second.Scalar());
        } else if (entry.second.IsMap()) {  // labels:, annotations:
          for (const auto& inner : entry.second) {
            if (inner.second.IsScalar())
              alert.fields[concat({key, ".", inner.first.as<std::string>("")})] =
                  oneLine(inner.second.Scalar());
          }
        }
      }
      alerts.push_back(std::move(alert));
    }
  }
  return alerts;
}

std::string headingSlug(std::string_view heading) {
  std::string slug;
  for (const char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalnum(u) != 0 || c == '-' || c == '_') {
      slug += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      slug += '-';
    }
  }
  return slug;
}

std::set<std::string> markdownAnchors(std::string_view markdown) {
  static const std::regex kHeading(R"(^#{1,6}\s+(.*?)\s*#*\s*$)");
  static const std::regex kExplicit(R"re(<a\s+(?:id|name)\s*=\s*"([^"]+)")re");
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool inFence = false;
  for (const Line& line : splitLines(markdown)) {
    if (line.text.rfind("```", 0) == 0 || line.text.rfind("~~~", 0) == 0) {
      inFence = !inFence;
      continue;
    }
    if (inFence) continue;
    for (std::sregex_iterator it(line.text.begin(), line.text.end(), kExplicit), end; it != end;
         ++it) {
      anchors.insert((*it)[1]);
    }
    std::smatch m;
    if (line.indent > 3 || !std::regex_match(line.text, m, kHeading)) continue;
    const std::string slug = headingSlug(m[1].str());
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

std::vector<Problem> checkAlertRules(const std::string& rulesPath, std::string_view rulesYaml,
                                     const std::string& runbookPath,
                                     const std::set<std::string>& anchors) {
  std::vector<Problem> problems;
  const std::string runbookName = runbookPath.substr(runbookPath.find_last_of('/') + 1);
  std::vector<AlertRule> alerts;
  try {
    alerts = parseAlertRules(rulesYaml);
  } catch (const RuleFileError& e) {
    const std::string what = e.what();
    problems.push_back(
        {rulesPath, "line " + std::to_string(e.line()), what.substr(what.find(": ") + 2)});
    return problems;
  }
  for (const AlertRule& alert : alerts) {
    const std::string where = "line " + std::to_string(alert.line) + ", alert " + alert.name;
    const auto field = [&](const char* key) {
      const auto it = alert.fields.find(key);
      return it == alert.fields.end() ? std::string() : it->second;
    };
    const auto report = [&](const std::string& what) {
      problems.push_back({rulesPath, where, what});
    };

    const std::string severity = field("labels.severity");
    if (severity.empty()) {
      report("has no severity label");
    } else if (severity != "critical" && severity != "warning" && severity != "info") {
      report("severity \"" + severity + "\" is not critical, warning or info");
    }
    if (field("annotations.summary").empty()) report("has no summary annotation");
    const std::string description = field("annotations.description");
    if (description.empty()) {
      report("has no description annotation");
    } else if (description.find("$value") == std::string::npos) {
      report("its description does not quote the value ({{ $value }})");
    }
    const std::string url = field("annotations.runbook_url");
    if (url.empty()) {
      report("has no runbook_url annotation");
      continue;
    }
    const std::size_t hash = url.find('#');
    const std::string document = url.substr(0, hash);
    if (hash == std::string::npos || hash + 1 == url.size()) {
      report("runbook_url " + url + " has no #anchor");
      continue;
    }
    if (document.size() < runbookName.size() + 1 ||
        document.compare(document.size() - runbookName.size() - 1, std::string::npos,
                         "/" + runbookName) != 0) {
      report(concat({"runbook_url ", url, " does not point to ", runbookName}));
    }
    const std::string anchor = url.substr(hash + 1);
    if (anchors.count(anchor) == 0) {
      report(concat({"runbook_url anchor #", anchor, " does not exist in ", runbookPath}));
    }
    if (anchor != lower(alert.name)) {
      report("runbook_url anchor #" + anchor + " is not the alert's own section #" +
             lower(alert.name));
    }
  }
  return problems;
}

}  // namespace idemwatch::dashlint

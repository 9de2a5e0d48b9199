#include "runbook_check.hpp"

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

bool isIgnorable(const Line& line) {
  return line.text.empty() || line.text[0] == '#';
}

std::string trim(std::string s) {
  const auto notSpace = [](unsigned char c) { return std::isspace(c) == 0; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), notSpace));
  s.erase(std::find_if(s.rbegin(), s.rend(), notSpace).base(), s.end());
  return s;
}

std::string unquote(std::string s) {
  s = trim(std::move(s));
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return s;
}

// "key: value" → {key, value}; false when the line is not a mapping entry.
bool splitKey(const std::string& text, std::string& key, std::string& value) {
  static const std::regex kEntry(R"(^([A-Za-z_][A-Za-z0-9_]*):(\s+(.*))?$)");
  std::smatch m;
  if (!std::regex_match(text, m, kEntry)) return false;
  key = m[1];
  value = m[3];
  return true;
}

bool isBlockIndicator(const std::string& v) {
  static const std::regex kBlock(R"(^[|>][+-]?\s*(#.*)?$)");
  return std::regex_match(v, kBlock);
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

std::vector<AlertRule> parseAlertRules(std::string_view yaml) {
  static const std::string kAlert = "- alert:";
  const std::vector<Line> lines = splitLines(yaml);
  std::vector<AlertRule> alerts;
  std::size_t i = 0;
  while (i < lines.size()) {
    const Line& head = lines[i++];
    if (head.text.rfind(kAlert, 0) != 0) continue;
    AlertRule alert;
    alert.name = unquote(head.text.substr(kAlert.size()));
    alert.line = head.number;
    const int bodyIndent = head.indent + 2;  // the column of "alert:"
    std::string section;
    int sectionIndent = -1;
    while (i < lines.size()) {
      const Line& line = lines[i];
      if (isIgnorable(line)) {
        ++i;
        continue;
      }
      if (line.indent < bodyIndent) break;  // the next rule, group or file section
      ++i;
      if (!section.empty() && line.indent <= sectionIndent) section.clear();
      std::string key;
      std::string value;
      if (!splitKey(line.text, key, value)) continue;
      if (trim(value).empty()) {  // a nested mapping: labels:, annotations:
        section = key;
        sectionIndent = line.indent;
        continue;
      }
      if (isBlockIndicator(value)) value.clear();
      // Continuation lines (block scalars, multi-line plain scalars) are indented deeper.
      while (i < lines.size() && (lines[i].text.empty() || lines[i].indent > line.indent)) {
        if (!lines[i].text.empty()) {
          if (!value.empty()) value += ' ';
          value += lines[i].text;
        }
        ++i;
      }
      alert.fields[section.empty() ? key : concat({section, ".", key})] = unquote(value);
    }
    alerts.push_back(std::move(alert));
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
  for (const AlertRule& alert : parseAlertRules(rulesYaml)) {
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

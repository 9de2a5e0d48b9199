#include "promql_scan.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "template_vars.hpp"

namespace idemwatch::dashlint {
namespace {

bool isIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}
bool isIdentChar(char c) {
  return isIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool isSpace(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return std::string(s);
}

template <std::size_t N>
bool oneOf(const std::string& word, const std::array<std::string_view, N>& words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// Keywords followed by a parenthesised list of label names, not by an expression.
constexpr std::array<std::string_view, 6> kLabelListKeywords = {
    "by", "without", "on", "ignoring", "group_left", "group_right"};
constexpr std::array<std::string_view, 9> kOtherKeywords = {
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "@"};
constexpr std::array<std::string_view, 12> kAggregations = {
    "sum",    "min",   "max",  "avg",     "group",        "stddev",
    "stdvar", "count", "topk", "bottomk", "count_values", "quantile"};

class Scanner {
 public:
  explicit Scanner(std::string_view expr) : s_(expr) {}

  PromqlScan run() {
    while (i_ < s_.size()) step();
    return std::move(out_);
  }

 private:
  void step() {
    const char c = s_[i_];
    if (c == '#') {  // comment to the end of the line
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
    } else if (c == '"' || c == '\'' || c == '`') {
      skipString();
    } else if (c == '{') {
      Selector sel;
      const std::size_t start = i_;
      readMatchers(sel);
      sel.text = std::string(s_.substr(start, i_ - start));
      out_.selectors.push_back(std::move(sel));
    } else if (c == '[') {
      readRange();
    } else if (c == '$') {  // a dashboard variable outside a string, e.g. topk($n, …)
      ++i_;
      if (i_ < s_.size() && s_[i_] == '{') {
        while (i_ < s_.size() && s_[i_] != '}') ++i_;
        ++i_;
      } else {
        while (i_ < s_.size() && isIdentChar(s_[i_])) ++i_;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0 ||
               (c == '.' && i_ + 1 < s_.size() &&
                std::isdigit(static_cast<unsigned char>(s_[i_ + 1])) != 0)) {
      skipNumber();
    } else if (isIdentStart(c)) {
      readIdentifier();
    } else {
      ++i_;
    }
  }

  void skipSpaces() {
    while (i_ < s_.size() && isSpace(s_[i_])) ++i_;
  }

  // Leaves i_ after the closing quote.
  std::string skipString() {
    const char quote = s_[i_++];
    std::string value;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\' && quote != '`' && i_ + 1 < s_.size()) ++i_;
      value += s_[i_++];
    }
    if (i_ >= s_.size()) {
      out_.errors.push_back("unterminated string");
    } else {
      ++i_;
    }
    return value;
  }

  // Numbers and durations: 1, 0.5, 1e-9, 0x1f, 5m, 1h30m.
  void skipNumber() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if ((c == 'e' || c == 'E') && i_ + 1 < s_.size() &&
          (s_[i_ + 1] == '+' || s_[i_ + 1] == '-')) {
        i_ += 2;
      } else if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.') {
        ++i_;
      } else {
        break;
      }
    }
  }

  void skipParenthesised() {
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"' || c == '\'' || c == '`') {
        skipString();
        continue;
      }
      ++i_;
      if (c == '(') ++depth;
      if (c == ')' && --depth == 0) return;
    }
    out_.errors.push_back("unbalanced parentheses");
  }

  void readIdentifier() {
    const std::size_t start = i_;
    while (i_ < s_.size() && isIdentChar(s_[i_])) ++i_;
    const std::string word(s_.substr(start, i_ - start));
    const std::string key = lower(word);
    const std::size_t after = i_;
    skipSpaces();
    const char next = i_ < s_.size() ? s_[i_] : '\0';

    if (oneOf(key, kLabelListKeywords)) {
      if (next == '(') skipParenthesised();
      return;
    }
    if (oneOf(key, kOtherKeywords)) return;
    if (next == '(') return;  // a function or an aggregation
    if (oneOf(key, kAggregations) && i_ + 1 < s_.size()) {
      // sum by (…) (…), sum without (…) (…)
      std::size_t j = i_;
      while (j < s_.size() && isIdentChar(s_[j])) ++j;
      const std::string follower = lower(s_.substr(i_, j - i_));
      if (follower == "by" || follower == "without") return;
    }

    Selector sel;
    sel.metric = word;
    if (next == '{') {
      readMatchers(sel);
      sel.text = std::string(s_.substr(start, i_ - start));
    } else {
      i_ = after;
      sel.text = word;
    }
    out_.selectors.push_back(std::move(sel));
  }

  // At '{': reads label matchers up to and including '}'.
  void readMatchers(Selector& sel) {
    ++i_;
    for (;;) {
      skipSpaces();
      if (i_ >= s_.size()) {
        out_.errors.push_back("unterminated label matchers");
        return;
      }
      if (s_[i_] == '}') {
        ++i_;
        return;
      }
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      LabelMatcher m;
      if (s_[i_] == '"') {
        m.label = skipString();  // quoted label name (UTF-8 names)
      } else if (isIdentStart(s_[i_])) {
        const std::size_t start = i_;
        while (i_ < s_.size() && isIdentChar(s_[i_])) ++i_;
        m.label = std::string(s_.substr(start, i_ - start));
      } else {
        out_.errors.push_back("cannot read the label matchers of a selector");
        skipTo('}');
        return;
      }
      skipSpaces();
      for (std::string_view op : {"=~", "!~", "!=", "="}) {
        if (s_.substr(i_, op.size()) == op) {
          m.op = std::string(op);
          i_ += op.size();
          break;
        }
      }
      skipSpaces();
      if (m.op.empty() || i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'' && s_[i_] != '`')) {
        out_.errors.push_back("cannot read the matcher on label " + m.label);
        skipTo('}');
        return;
      }
      m.value = skipString();
      sel.matchers.push_back(std::move(m));
    }
  }

  void skipTo(char c) {
    while (i_ < s_.size() && s_[i_] != c) ++i_;
    if (i_ < s_.size()) ++i_;
  }

  void readRange() {
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != ']') ++i_;
    if (i_ >= s_.size()) {
      out_.errors.push_back("unterminated range [");
      return;
    }
    out_.ranges.push_back(trim(s_.substr(start, i_ - start)));
    ++i_;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  PromqlScan out_;
};

}  // namespace

PromqlScan scanPromql(std::string_view expr) {
  return Scanner(expr).run();
}

bool filtersByVariable(const Selector& selector, std::string_view label,
                       std::string_view variable) {
  return std::any_of(
      selector.matchers.begin(), selector.matchers.end(), [&](const LabelMatcher& m) {
        if (m.label != label || (m.op != "=" && m.op != "=~")) return false;
        const std::vector<VariableRef> refs = findVariableRefs(m.value);
        return std::any_of(refs.begin(), refs.end(),
                           [&](const VariableRef& ref) { return ref.name == variable; });
      });
}

}  // namespace idemwatch::dashlint

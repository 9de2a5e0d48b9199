#include "template_vars.hpp"

#include <algorithm>
#include <cctype>

namespace idemwatch::dashlint {
namespace {

bool isNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool isNameChar(char c) {
  return isNameStart(c) || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Reads a name at `pos`; returns its end, or `pos` when there is none.
std::size_t nameEnd(std::string_view text, std::size_t pos) {
  if (pos >= text.size() || !isNameStart(text[pos])) return pos;
  while (pos < text.size() && isNameChar(text[pos])) ++pos;
  return pos;
}

}  // namespace

std::vector<VariableRef> findVariableRefs(std::string_view text) {
  std::vector<VariableRef> refs;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      const std::size_t nameBegin = i + 2;
      const std::size_t nameStop = nameEnd(text, nameBegin);
      const std::size_t close = text.find('}', nameStop);
      if (nameStop > nameBegin && close != std::string_view::npos &&
          (text[nameStop] == '}' || text[nameStop] == ':')) {
        refs.push_back({i, close + 1, std::string(text.substr(nameBegin, nameStop - nameBegin))});
        i = close + 1;
        continue;
      }
    } else if (text[i] == '$') {
      const std::size_t nameStop = nameEnd(text, i + 1);
      if (nameStop > i + 1) {
        refs.push_back({i, nameStop, std::string(text.substr(i + 1, nameStop - i - 1))});
        i = nameStop;
        continue;
      }
    } else if (text.substr(i, 2) == "[[") {
      const std::size_t nameBegin = i + 2;
      const std::size_t nameStop = nameEnd(text, nameBegin);
      const std::size_t close = text.find("]]", nameStop);
      if (nameStop > nameBegin && close != std::string_view::npos &&
          (text.substr(nameStop, 2) == "]]" || text[nameStop] == ':')) {
        refs.push_back({i, close + 2, std::string(text.substr(nameBegin, nameStop - nameBegin))});
        i = close + 2;
        continue;
      }
    }
    ++i;
  }
  return refs;
}

std::string substituteVariables(std::string_view text,
                                const std::map<std::string, std::string>& values,
                                std::set<std::string>& unset) {
  std::string out;
  std::size_t copied = 0;
  for (const VariableRef& ref : findVariableRefs(text)) {
    const auto value = values.find(ref.name);
    if (value == values.end()) {
      unset.insert(ref.name);
      continue;
    }
    out.append(text.substr(copied, ref.begin - copied));
    out.append(value->second);
    copied = ref.end;
  }
  out.append(text.substr(copied));
  return out;
}

std::string toOneLine(std::string_view expr) {
  std::string out;
  bool pendingSpace = false;
  std::size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '#') {
      while (i < expr.size() && expr[i] != '\n') ++i;
      pendingSpace = !out.empty();
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      pendingSpace = !out.empty();
      ++i;
      continue;
    }
    if (pendingSpace) out += ' ';
    pendingSpace = false;
    if (c == '"' || c == '\'' || c == '`') {  // copy the literal as written
      std::size_t j = i + 1;
      while (j < expr.size() && expr[j] != c) j += (expr[j] == '\\' && c != '`') ? 2 : 1;
      j = std::min(j + 1, expr.size());
      out.append(expr.substr(i, j - i));
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace idemwatch::dashlint

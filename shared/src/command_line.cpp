#include "idem/command_line.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "idem/duration.hpp"

namespace idem {

CommandLine::CommandLine(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  auto find = [&](const std::string& name) -> const FlagSpec* {
    auto it =
        std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) { return s.name == name; });
    return it == specs.end() ? nullptr : &*it;
  };
  bool onlyPositionals = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (onlyPositionals || arg.size() < 2 || !arg.starts_with("-") || arg == "-") {
      positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      onlyPositionals = true;
      continue;
    }
    std::string body = arg.substr(arg.starts_with("--") ? 2 : 1);
    std::optional<std::string> inlineValue;
    if (auto eq = body.find('='); eq != std::string::npos) {
      inlineValue = body.substr(eq + 1);
      body.resize(eq);
    }
    const FlagSpec* spec = find(body);
    if (spec == nullptr) throw UsageError("unknown flag --" + body + " (see --help)");
    if (values_.contains(spec->name)) throw UsageError("--" + spec->name + " is given twice");
    if (!spec->takesValue) {
      if (inlineValue) throw UsageError("--" + spec->name + " takes no value");
      values_[spec->name] = "true";
      continue;
    }
    if (inlineValue) {
      values_[spec->name] = *inlineValue;
    } else if (i + 1 < args.size()) {
      values_[spec->name] = args[++i];
    } else {
      throw UsageError("--" + spec->name + " needs a value" +
                       (spec->placeholder.empty() ? "" : " (" + spec->placeholder + ")"));
    }
  }
}

std::optional<std::string> CommandLine::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string CommandLine::valueOr(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

std::optional<long long> CommandLine::integer(const std::string& name, long long min,
                                              long long max) const {
  const auto text = value(name);
  if (!text) return std::nullopt;
  long long v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) {
    throw UsageError("--" + name + " must be a whole number, got '" + *text + "'");
  }
  if (v < min || v > max) {
    throw UsageError("--" + name + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + *text);
  }
  return v;
}

std::optional<double> CommandLine::number(const std::string& name, double min, double max) const {
  const auto text = value(name);
  if (!text) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) {
    throw UsageError("--" + name + " must be a number, got '" + *text + "'");
  }
  if (!(v >= min && v <= max)) {
    std::ostringstream range;
    range << min << " and " << max;
    throw UsageError("--" + name + " must be between " + range.str() + ", got " + *text);
  }
  return v;
}

std::optional<std::chrono::milliseconds> CommandLine::duration(const std::string& name) const {
  const auto text = value(name);
  if (!text) return std::nullopt;
  const auto d = parseDuration(*text);
  if (!d) {
    throw UsageError("--" + name + " must be a duration such as 500ms, 5s, 1m or 24h, got '" +
                     *text + "'");
  }
  return d;
}

std::string CommandLine::describe(const std::vector<FlagSpec>& specs) {
  std::ostringstream out;
  for (const FlagSpec& s : specs) {
    std::string left = "  --" + s.name + (s.takesValue ? "=" + s.placeholder : "");
    out << left;
    out << std::string(left.size() < 36 ? 36 - left.size() : 1, ' ') << s.help << "\n";
  }
  return out.str();
}

}  // namespace idem

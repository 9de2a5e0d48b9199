#include "idem/command_line.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "idem/build_info.hpp"
#include "idem/duration.hpp"

namespace idem {

struct CommandLine::Flag {
  std::string name;
  std::string placeholder;  // empty: a switch
  std::string help;
  std::string defaultText;
  std::function<void(const std::string&)> set;
  CLI::Option* option = nullptr;
  bool repeatable = false;
};

namespace {

std::string flagName(const std::string& name) {
  return "--" + name;
}

std::string numberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// CLI11's wording for a value given to a switch ("quiet was given a disallowed flag override"),
// translated: the only parse error the layer does not detect itself.
std::optional<std::string> switchGivenValue(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string suffix = " was given a disallowed flag override";
  if (!what.ends_with(suffix)) return std::nullopt;
  std::string name = what.substr(0, what.size() - suffix.size());
  while (name.starts_with("-")) name.erase(0, 1);
  return name;
}

void wrapInto(std::ostringstream& out, const std::string& left, const std::string& text) {
  constexpr std::size_t kColumn = 34, kWidth = 100;
  out << left;
  std::size_t column = left.size();
  if (column + 2 > kColumn) {
    out << "\n";
    column = 0;
  }
  out << std::string(kColumn - column, ' ');
  column = kColumn;
  std::istringstream words(text);
  bool first = true;
  for (std::string word; words >> word; first = false) {
    if (!first && column + 1 + word.size() > kWidth) {
      out << "\n" << std::string(kColumn, ' ');
      column = kColumn;
    } else if (!first) {
      out << ' ';
      ++column;
    }
    out << word;
    column += word.size();
  }
  out << "\n";
}

}  // namespace

UsageError badValue(const std::string& name, const std::string& expectation,
                    const std::string& value) {
  return UsageError(flagName(name) + " must be " + expectation + ", got '" + value + "'");
}

std::string versionLine(const std::string& program) {
  return program + " " + kVersion + " (revision " + buildRevision() + ")";
}

CommandLine::CommandLine(std::string program, std::string usage, std::string description)
    : program_(std::move(program)),
      usage_(std::move(usage)),
      description_(std::move(description)) {}

CommandLine::~CommandLine() = default;

CommandLine::Flag& CommandLine::add(const std::string& name, const std::string& placeholder,
                                    const std::string& help, const std::string& defaultText,
                                    std::function<void(const std::string&)> set) {
  flags_.push_back(
      std::make_unique<Flag>(Flag{name, placeholder, help, defaultText, std::move(set), nullptr}));
  return *flags_.back();
}

void CommandLine::text(const std::string& name, const std::string& placeholder,
                       const std::string& help, std::string& target) {
  add(name, placeholder, help, target, [&target](const std::string& v) { target = v; });
}

void CommandLine::text(const std::string& name, const std::string& placeholder,
                       const std::string& help, std::optional<std::string>& target) {
  add(name, placeholder, help, target.value_or(""),
      [&target](const std::string& v) { target = v; });
}

void CommandLine::addInteger(const std::string& name, const std::string& placeholder,
                             const std::string& help, const std::string& defaultText, long long min,
                             long long max, std::function<void(long long)> set) {
  add(name, placeholder, help, defaultText,
      [name, min, max, set = std::move(set)](const std::string& text) {
        long long v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size()) {
          throw badValue(name, "a whole number", text);
        }
        if (v < min || v > max) {
          throw UsageError(flagName(name) + " must be between " + std::to_string(min) + " and " +
                           std::to_string(max) + ", got " + text);
        }
        set(v);
      });
}

void CommandLine::number(const std::string& name, const std::string& placeholder,
                         const std::string& help, double& target, double min, double max) {
  add(name, placeholder, help, numberText(target), [=, &target](const std::string& text) {
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw badValue(name, "a number", text);
    }
    if (!(v >= min && v <= max)) {
      throw UsageError(flagName(name) + " must be between " + numberText(min) + " and " +
                       numberText(max) + ", got " + text);
    }
    target = v;
  });
}

namespace {

std::chrono::milliseconds durationValue(const std::string& name, const std::string& text,
                                        std::chrono::milliseconds min) {
  const auto d = parseDuration(text);
  if (!d) throw badValue(name, "a duration such as 500ms, 5s, 1m or 24h", text);
  if (*d < min) {
    throw UsageError(flagName(name) + " must be at least " + formatDuration(min) + ", got " + text);
  }
  return *d;
}

}  // namespace

void CommandLine::duration(const std::string& name, const std::string& help,
                           std::chrono::milliseconds& target, std::chrono::milliseconds min) {
  add(name, "DURATION", help, formatDuration(target),
      [=, &target](const std::string& text) { target = durationValue(name, text, min); });
}

void CommandLine::duration(const std::string& name, const std::string& help,
                           std::optional<std::chrono::milliseconds>& target,
                           std::chrono::milliseconds min) {
  add(name, "DURATION", help, target ? formatDuration(*target) : "",
      [=, &target](const std::string& text) { target = durationValue(name, text, min); });
}

void CommandLine::list(const std::string& name, const std::string& placeholder,
                       const std::string& help, std::vector<std::string>& target) {
  std::string shown;
  for (const std::string& item : target) shown += (shown.empty() ? "" : ",") + item;
  add(name, placeholder, help, shown, [=, &target](const std::string& text) {
    std::vector<std::string> items;
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      std::string item = text.substr(start, comma - start);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (item.empty()) throw badValue(name, "a list without an empty item", text);
      items.push_back(item);
      start = comma + 1;
    }
    target = items;
  });
}

void CommandLine::flag(const std::string& name, const std::string& help, bool& target) {
  add(name, "", help, "", [&target](const std::string&) { target = true; });
}

void CommandLine::flag(const std::string& name, const std::string& help,
                       std::function<void()> given) {
  add(name, "", help, "", [given = std::move(given)](const std::string&) { given(); });
}

void CommandLine::custom(const std::string& name, const std::string& placeholder,
                         const std::string& help, const std::string& defaultText,
                         std::function<void(const std::string&)> set) {
  add(name, placeholder, help, defaultText, std::move(set));
}

void CommandLine::each(const std::string& name, const std::string& placeholder,
                       const std::string& help, std::function<void(const std::string&)> set) {
  add(name, placeholder, help, "", std::move(set)).repeatable = true;
}

void CommandLine::positionals(std::vector<std::string>& target, std::size_t max) {
  positionals_ = &target;
  maxPositionals_ = max;
}

void CommandLine::check(std::function<void()> rule) {
  rules_.push_back(std::move(rule));
}

bool CommandLine::parse(const std::vector<std::string>& args, std::ostream& out) {
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();
  CLI::Option* help = app.add_flag("-h,--help");
  CLI::Option* version = app.add_flag("--version");
  for (const auto& f : flags_) {
    if (f->placeholder.empty()) {
      f->option = app.add_flag(flagName(f->name))->disable_flag_override();
    } else {
      // Zero or one value: a flag left without one is reported here, in our wording.
      f->option = app.add_option(flagName(f->name))
                      ->expected(0, 1)
                      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }

  // CLI11 lets "--quiet=true" through a switch; a switch takes no value at all.
  for (const std::string& arg : args) {
    if (arg == "--") break;
    const std::size_t eq = arg.find('=');
    if (!arg.starts_with("--") || eq == std::string::npos) continue;
    for (const auto& f : flags_) {
      if (f->placeholder.empty() && arg.compare(2, eq - 2, f->name) == 0 &&
          eq - 2 == f->name.size()) {
        throw UsageError(flagName(f->name) + " takes no value");
      }
    }
  }

  // CLI11 wants the arguments in reverse, the program name excluded.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (const auto name = switchGivenValue(e))
      throw UsageError(flagName(*name) + " takes no value");
    throw UsageError(e.what());
  }
  if (help->count() > 0) {
    out << this->help();
    return false;
  }
  if (version->count() > 0) {
    out << versionLine(program_) << "\n";
    return false;
  }

  bool onlyPositionals = false;
  std::vector<std::string> positionals;
  for (const std::string& extra : app.remaining()) {
    if (!onlyPositionals && extra == "--") {
      onlyPositionals = true;
    } else if (!onlyPositionals && extra.size() > 1 && extra.starts_with("-")) {
      throw UsageError("unknown flag " + extra.substr(0, extra.find('=')) + " (see --help)");
    } else {
      positionals.push_back(extra);
    }
  }
  if (positionals.size() > (positionals_ == nullptr ? 0 : maxPositionals_)) {
    throw UsageError("unexpected argument '" +
                     positionals[positionals_ == nullptr ? 0 : maxPositionals_] + "'");
  }
  if (positionals_ != nullptr) *positionals_ = positionals;

  for (const auto& f : flags_) {
    if (f->option->count() == 0) continue;
    if (f->option->count() > 1 && !f->repeatable) {
      throw UsageError(flagName(f->name) + " is given twice");
    }
    if (f->placeholder.empty()) {
      f->set("");
      continue;
    }
    // CLI11 leaves an empty value for a flag without one ("--agents" last, "--agents --quiet");
    // an empty value ("--agents=") is no value either.
    const std::vector<std::string>& values = f->option->results();
    if (values.size() < f->option->count() ||
        std::any_of(values.begin(), values.end(), [](const std::string& v) { return v.empty(); })) {
      throw UsageError(flagName(f->name) + " needs a value (" + f->placeholder + ")");
    }
    for (const std::string& v : values) f->set(v);
  }
  for (const auto& f : flags_) f->option = nullptr;  // they pointed into `app`, gone after this
  for (const auto& rule : rules_) rule();
  return true;
}

std::string CommandLine::help() const {
  std::ostringstream out;
  out << "usage: " << usage_ << "\n\nflags:\n";
  for (const auto& f : flags_) {
    const std::string left =
        "  " + flagName(f->name) + (f->placeholder.empty() ? "" : "=" + f->placeholder);
    wrapInto(out, left,
             f->help + (f->defaultText.empty() ? "" : " (default " + f->defaultText + ")"));
  }
  wrapInto(out, "  -h, --help", "print this help and exit");
  wrapInto(out, "  --version", "print the version and exit");
  if (!description_.empty())
    out << "\n" << description_ << (description_.ends_with('\n') ? "" : "\n");
  return out.str();
}

int guardedMain(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "%s: an unexpected error (not a std::exception)\n", program);
    return 1;
  }
}

}  // namespace idem

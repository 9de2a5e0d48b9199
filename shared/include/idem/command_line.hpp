// The command line of every idemwatch program but the GUI (which keeps QCommandLineParser): a thin
// layer over CLI11 for the Prometheus-style flags (--web.listen-address=:9477 or
// --web.listen-address :9477, -h/--help, --version). Each flag is declared once, bound to its
// target with its placeholder and help; the target's value at declaration is the default the help
// shows, and the help is generated from the declarations. Every mistake has one wording, in every
// program:
//
//   unknown flag --agent (see --help)          --agents needs a value (N)
//   --quiet takes no value                     --agents is given twice
//   --agents must be a whole number, got 'four'
//   --agents must be between 1 and 10, got 11  --rate must be a number, got 'fast'
//   --window must be a duration such as 500ms, 5s, 1m or 24h, got '5 minutes'
//   --collect-interval must be at least 100ms, got 10ms
//   --reconcile-biz-types must be a list without an empty item, got 'payment,,x'
//   unexpected argument 'extra'
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem {

// A mistake in how the program was called: printed as one line, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "--NAME must be EXPECTATION, got 'VALUE'": the wording of every refused value.
UsageError badValue(const std::string& name, const std::string& expectation,
                    const std::string& value);

// "PROGRAM VERSION (revision R)".
std::string versionLine(const std::string& program);

class CommandLine {
 public:
  // `usage` is the help's first line after "usage: " (e.g. "idemctl settle KEY [flags]");
  // `description`, a free-form paragraph printed after the flags.
  CommandLine(std::string program, std::string usage, std::string description = {});
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // The bindings. A target is written only when its flag is given; names are without dashes.
  void text(const std::string& name, const std::string& placeholder, const std::string& help,
            std::string& target);
  void text(const std::string& name, const std::string& placeholder, const std::string& help,
            std::optional<std::string>& target);
  template <std::integral T>
  void integer(const std::string& name, const std::string& placeholder, const std::string& help,
               T& target, long long min, long long max) {
    addInteger(name, placeholder, help, std::to_string(target), min, max,
               [&target](long long v) { target = static_cast<T>(v); });
  }
  template <std::integral T>
  void integer(const std::string& name, const std::string& placeholder, const std::string& help,
               std::optional<T>& target, long long min, long long max) {
    addInteger(name, placeholder, help, {}, min, max,
               [&target](long long v) { target = static_cast<T>(v); });
  }
  void number(const std::string& name, const std::string& placeholder, const std::string& help,
              double& target, double min, double max);
  void duration(const std::string& name, const std::string& help, std::chrono::milliseconds& target,
                std::chrono::milliseconds min = std::chrono::milliseconds(0));
  void duration(const std::string& name, const std::string& help,
                std::optional<std::chrono::milliseconds>& target,
                std::chrono::milliseconds min = std::chrono::milliseconds(0));
  // Comma-separated, items trimmed of spaces, none empty.
  void list(const std::string& name, const std::string& placeholder, const std::string& help,
            std::vector<std::string>& target);
  void flag(const std::string& name, const std::string& help, bool& target);
  void flag(const std::string& name, const std::string& help, std::function<void()> given);
  // The hook for everything else: `set` gets the text and throws UsageError (badValue) for a bad
  // one. `defaultText` is what the help shows, empty for none.
  void custom(const std::string& name, const std::string& placeholder, const std::string& help,
              const std::string& defaultText, std::function<void(const std::string&)> set);

  // A flag that may be given any number of times (--set A=1 --set B=2): `set` gets each value in
  // order.
  void each(const std::string& name, const std::string& placeholder, const std::string& help,
            std::function<void(const std::string&)> set);

  // Arguments that are not flags, at most `max` (none are accepted unless declared).
  void positionals(std::vector<std::string>& target, std::size_t max = SIZE_MAX);
  // A rule between flags, checked after every flag is set; throws UsageError.
  void check(std::function<void()> rule);

  // Throws UsageError. False when -h/--help or --version was given: the help or the version line
  // is printed on `out` and the program exits 0.
  bool parse(const std::vector<std::string>& args, std::ostream& out);

  // "usage: ...", then one "  --name=PLACEHOLDER  help (default X)" per flag.
  std::string help() const;

 private:
  struct Flag;

  Flag& add(const std::string& name, const std::string& placeholder, const std::string& help,
            const std::string& defaultText, std::function<void(const std::string&)> set);
  void addInteger(const std::string& name, const std::string& placeholder, const std::string& help,
                  const std::string& defaultText, long long min, long long max,
                  std::function<void(long long)> set);

  std::string program_;
  std::string usage_;
  std::string description_;
  std::vector<std::unique_ptr<Flag>> flags_;
  std::vector<std::string>* positionals_ = nullptr;
  std::size_t maxPositionals_ = 0;
  std::vector<std::function<void()>> rules_;
};

// The end of every main: runs `body`; a UsageError is one line "PROGRAM: what" on stderr and exit
// code 2, any other exception one line and exit code 1, so no program dies in std::terminate.
int guardedMain(const char* program, const std::function<int()>& body);

}  // namespace idem

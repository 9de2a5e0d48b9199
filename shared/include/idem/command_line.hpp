// A small parser for the Prometheus-style flags every idemwatch program takes
// (--web.listen-address=:9477, --db.dsn "host=..."), with errors that name the flag.
#pragma once

#include <chrono>
#include <map>
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

struct FlagSpec {
  std::string name;  // without the leading dashes
  bool takesValue = true;
  std::string placeholder;  // e.g. "DURATION", for help
  std::string help;
};

class CommandLine {
 public:
  // Parses args (without the program name) against specs. Throws UsageError for an unknown flag,
  // a missing value, a value given to a switch, or a flag given twice.
  CommandLine(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

  bool has(const std::string& name) const { return values_.contains(name); }
  std::optional<std::string> value(const std::string& name) const;
  std::string valueOr(const std::string& name, const std::string& fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

  // Typed readers: throw UsageError naming the flag and the bad value.
  std::optional<long long> integer(const std::string& name, long long min, long long max) const;
  std::optional<double> number(const std::string& name, double min, double max) const;
  std::optional<std::chrono::milliseconds> duration(const std::string& name) const;

  // "  --name=VALUE   help" lines.
  static std::string describe(const std::vector<FlagSpec>& specs);

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace idem

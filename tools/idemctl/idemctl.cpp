#include "idemctl.hpp"

#include <algorithm>
#include <map>
#include <ostream>

#include "idem/build_info.hpp"
#include "idem/command_line.hpp"
#include "idem/database_error.hpp"
#include "idem/migrations.hpp"

namespace idem::ctl {
namespace {

// A function's static, not a namespace-scope one: registrations run during static
// initialisation, in an order across files that C++ leaves open. Keyed by (order, name): kept in
// command-list order, and a node's address stays valid as the map grows.
std::map<std::pair<int, std::string>, CommandRegistration>& registrations() {
  static std::map<std::pair<int, std::string>, CommandRegistration> all;
  return all;
}

const CommandRegistration* findCommand(const std::string& name) {
  for (const auto& [place, r] : registrations()) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// One line per command, its description in a column; "help" and "version" are run() itself.
std::string usageText() {
  // The names line up in one column as wide as the longest, so every summary starts together.
  std::size_t width = std::string("version").size();
  for (const CommandRegistration* r : registeredCommands()) {
    width = std::max(width, r->name.size() + (r->arguments.empty() ? 0 : r->arguments.size() + 1));
  }
  const std::string indent(2 + width + 2, ' ');
  const auto entry = [&](std::string name, const std::string& summary) {
    name.resize(width, ' ');
    std::string text;
    for (const char c : summary) text += c == '\n' ? "\n" + indent : std::string(1, c);
    return "  " + name + "  " + text + "\n";
  };
  std::string commands;
  for (const CommandRegistration* r : registeredCommands()) {
    commands += entry(r->arguments.empty() ? r->name : r->name + " " + r->arguments, r->summary);
  }
  return "usage: idemctl COMMAND [flags]\n\ncommands:\n" + commands +
         entry("help", "this text; `idemctl COMMAND --help` describes a command's flags") +
         entry("version", "print the version") +
         "\n"
         "The database comes from --db.dsn, else IDEMWATCH_DSN, else libpq's environment (PGHOST, "
         "...).\n";
}

}  // namespace

bool registerCommand(CommandRegistration registration) {
  const std::pair<int, std::string> place{registration.order, registration.name};
  return registrations().emplace(place, std::move(registration)).second;
}

std::vector<const CommandRegistration*> registeredCommands() {
  std::vector<const CommandRegistration*> out;
  for (const auto& [place, r] : registrations()) out.push_back(&r);
  return out;
}

int run(const std::vector<std::string>& args, Streams streams, const std::atomic<bool>& stop) {
  if (args.empty()) {
    streams.err << usageText();
    return kUsage;
  }
  const std::string& command = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (const CommandRegistration* r = findCommand(command)) return r->run(rest, streams, stop);
    if (command == "help" || command == "--help" || command == "-h") {
      streams.out << usageText();
      return kOk;
    }
    if (command == "version" || command == "--version") {
      streams.out << "idemctl " << IDEMWATCH_VERSION << " (revision " << buildRevision() << ")\n";
      return kOk;
    }
    streams.err << "idemctl: unknown command '" << command << "' (try: idemctl help)\n";
    return kUsage;
  } catch (const UsageError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kUsage;
  } catch (const DatabaseError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (const MigrationError& e) {
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (const std::exception& e) {
    // Anything else still ends in one line and exit code 1, never in std::terminate.
    streams.err << "idemctl " << command << ": " << e.what() << "\n";
    return kFailed;
  } catch (...) {
    streams.err << "idemctl " << command << ": an unexpected error (not a std::exception)\n";
    return kFailed;
  }
}

}  // namespace idem::ctl

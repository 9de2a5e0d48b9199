// Collectors register themselves, as node_exporter's do (collector.go's registerCollector): each
// collector's .cpp ends with a registration giving its name, whether it runs by default, the
// flags it declares (bound to ExporterOptions) and a factory. The registry adds
// --collector.NAME / --no-collector.NAME for each; a collector switched off is never built, so it
// neither updates nor publishes. Adding a collector is one new .cpp and its test: the CMake glob
// picks the file up and the library is linked whole, so no registration is dropped by the linker.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/biz_types.hpp"
#include "collectors/collector.hpp"
#include "exporter_options.hpp"
#include "incremental_reader.hpp"
#include "read_stats.hpp"

namespace idem::exporter {

// What a factory builds a collector from.
struct CollectorContext {
  const ExporterOptions& options;
  std::shared_ptr<BizTypes> bizTypes;  // shared by every collector with a biz_type label
  ReaderLimits reader;                 // --ratio-window, --max-tracked-gaps
  ReadStats& readStats;                // has a row for each table in `tables`
};

struct CollectorRegistration {
  std::string name{};  // --collector.NAME; the stage label of its self-health figures
  bool enabledByDefault = true;
  // Collection order, lowest first (then by name): unsettled_records runs first, so that the biz
  // types the tables already name are interned before new rows are counted.
  int order = 100;
  // The tables it reads incrementally: their rows-read and gap figures in self-health.
  std::vector<std::string> tables{};
  // Declares its flags, bound to `options` (may be empty).
  std::function<void(CommandLine& cli, ExporterOptions& options)> declareFlags{};
  std::function<std::unique_ptr<Collector>(const CollectorContext&)> make{};
};

// Called from each collector's file at static initialisation; the result only names the
// registration (`[[maybe_unused]] const bool registered = registerCollector(...)`).
bool registerCollector(CollectorRegistration registration);

// Every registered collector, in collection order.
std::vector<const CollectorRegistration*> registeredCollectors();

// Whether `registration` runs under `options` (--collector.NAME, else its default).
bool isEnabled(const CollectorRegistration& registration, const ExporterOptions& options);

}  // namespace idem::exporter

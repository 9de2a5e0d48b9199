// The collector interface, after Prometheus' node_exporter: one small collector per concern, each
// in its own file, registering itself at its end (registry.hpp). The collection thread calls
// update() with the one database connection; scrapes call collect() from the web server's threads.
// A collector holds its own lock only to swap in-memory numbers, never across a database call, so
// a scrape never waits on the database.
#pragma once

#include <prometheus/metric_family.h>

#include <chrono>
#include <pqxx/connection>
#include <string_view>
#include <vector>

namespace idem::exporter {

class IncrementalReader;

class Collector {
 public:
  virtual ~Collector() = default;

  // Names the collector in logs and in idempotency_exporter_collect_errors_total{stage}.
  virtual std::string_view name() const = 0;

  // How often update() should run; zero: at every collection (--collect-interval).
  virtual std::chrono::milliseconds interval() const { return std::chrono::milliseconds(0); }

  // Collection thread only. Reads the database and publishes the result in memory. Throws on
  // database errors; whatever it had already published stays consistent.
  virtual void update(pqxx::connection& connection) = 0;

  // Collection thread only. The incremental readers its counts come from, for the collection
  // loop to look up their rows on a server that replaced the one they were read from.
  virtual std::vector<IncrementalReader*> readers() { return {}; }

  // Any thread; never touches the database. Appends this collector's metric families.
  virtual void collect(std::vector<prometheus::MetricFamily>& out) const = 0;
};

}  // namespace idem::exporter

// idemwatch-exporter as a library: the collectors, the collection thread and the web server, put
// together from ExporterOptions. main.cpp and the tests both use this.
#pragma once

#include <prometheus/metric_family.h>

#include <memory>
#include <vector>

#include "exporter_options.hpp"

namespace idem::exporter {

class CollectorSet;
class CollectionLoop;
class WebServer;

class Exporter {
 public:
  // Reads --web.config.file, resolves the DSN, starts serving and collecting. Throws UsageError
  // (bad DSN syntax), WebConfigError or WebServerError, each with a one-line message. An
  // unreachable database is not an error: the exporter serves db_up 0 and keeps trying.
  explicit Exporter(const ExporterOptions& options);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  std::vector<int> ports() const;
  // What a scrape would get, without HTTP (tests).
  std::vector<prometheus::MetricFamily> collect() const;
  // Collections finished so far.
  std::uint64_t collections() const;

 private:
  std::shared_ptr<CollectorSet> collectors_;
  std::unique_ptr<CollectionLoop> loop_;
  std::unique_ptr<WebServer> web_;
};

}  // namespace idem::exporter

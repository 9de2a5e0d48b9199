#include "web_server.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <dlfcn.h>
#include <prometheus/exposer.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "basic_auth.hpp"
#include "exporter_options.hpp"
#include "log.hpp"

namespace idem::exporter {

struct WebServer::Gate {
  std::string telemetryPath;
  std::unique_ptr<BasicAuth> auth;
  std::string landingPage;
};

namespace {

// civetweb's callbacks carry no user pointer of ours (prometheus-cpp's CivetServer owns it), so
// the gate of each server is found by the port the request arrived on.
std::mutex gatesMutex;
std::map<int, WebServer::Gate*> gates;
// Messages civetweb reports while starting (bind and TLS errors), to explain a failed start.
thread_local std::string* startErrors = nullptr;

void respond(mg_connection* conn, int status, const char* reason, const std::string& contentType,
             const std::string& body, const std::string& extraHeaders = {}) {
  mg_printf(
      conn,
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
      status, reason, contentType.c_str(), body.size(), extraHeaders.c_str());
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::strcmp(info->request_method, "HEAD") != 0) mg_write(conn, body.data(), body.size());
}

// 1: answered here; 0: civetweb goes on to prometheus-cpp's handler.
int beginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::unique_lock lock(gatesMutex);
  const auto found = gates.find(info->server_port);
  if (found == gates.end()) {
    lock.unlock();
    respond(conn, 503, "Service Unavailable", "text/plain; charset=utf-8", "starting\n");
    return 1;
  }
  const WebServer::Gate& gate = *found->second;
  lock.unlock();

  if (gate.auth && gate.auth->enabled()) {
    const char* header = mg_get_header(conn, "Authorization");
    if (header == nullptr || !gate.auth->allows(header)) {
      respond(conn, 401, "Unauthorized", "text/plain; charset=utf-8", "Unauthorized\n",
              "WWW-Authenticate: Basic realm=\"idemwatch-exporter\"\r\n");
      return 1;
    }
  }
  const std::string path = info->local_uri != nullptr ? info->local_uri : "";
  const bool get = std::strcmp(info->request_method, "GET") == 0 ||
                   std::strcmp(info->request_method, "HEAD") == 0;
  if (path == gate.telemetryPath) {
    if (!get) {
      respond(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8", "Method Not Allowed\n",
              "Allow: GET, HEAD\r\n");
      return 1;
    }
    return 0;
  }
  if (path == "/" && get) {
    respond(conn, 200, "OK", "text/html; charset=utf-8", gate.landingPage);
    return 1;
  }
  respond(conn, 404, "Not Found", "text/plain; charset=utf-8", "Not Found\n");
  return 1;
}

// While starting, civetweb's messages explain a failure (bind, TLS set-up); once serving, they are
// about single connections (a plain-HTTP client on the TLS port, a port scanner) and go to debug,
// so that strangers cannot fill the log.
int logMessage(const mg_connection*, const char* message) {
  if (startErrors != nullptr) {
    *startErrors += std::string(startErrors->empty() ? "" : "; ") + message;
    logWarn(std::string("web server: ") + message);
  } else {
    logDebug(std::string("web server: ") + message);
  }
  return 1;
}

std::string landingPage(const std::string& telemetryPath) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>idemwatch "
         "exporter</title></head>\n"
         "<body><h1>idemwatch exporter</h1>\n"
         "<p>Idempotency figures of the idem schema for Prometheus.</p>\n"
         "<p><a href=\"" +
         telemetryPath +
         "\">Metrics</a></p>\n"
         "<p>" +
         versionText() + "</p>\n</body></html>\n";
}

// civetweb wants the certificate and its key in one PEM file; the toolkit's format names two.
// Join them in a private file for civetweb to read at start, removed right after.
std::string joinedPem(const TlsServerConfig& tls) {
  char name[] = "/tmp/idemwatch-exporter-tls-XXXXXX";
  const int fd = mkstemp(name);  // mode 0600
  if (fd < 0) throw WebServerError("cannot create a private file for the TLS key in /tmp");
  close(fd);
  std::ofstream out(name, std::ios::binary | std::ios::trunc);
  for (const auto& path : {tls.certFile, tls.keyFile}) {
    std::ifstream in(path, std::ios::binary);
    out << in.rdbuf() << '\n';
  }
  if (!out) {
    unlink(name);
    throw WebServerError("cannot write the joined TLS certificate and key");
  }
  return name;
}

// Makes civetweb's TLS work on OpenSSL 3 (see exporter/tls_compat/): the two compat libraries are
// loaded once, before civetweb opens "libssl.so" and "libcrypto.so", which then resolve to them.
// Where the system's OpenSSL needs no help (its libssl.so exports everything), loading them is
// harmless; where they cannot be found, civetweb's own error explains what failed.
void loadTlsCompat() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("IDEMWATCH_TLS_COMPAT_DIR")) dirs.emplace_back(env);
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      const std::string self(exe, static_cast<std::size_t>(n));
      const std::string dir = self.substr(0, self.rfind('/'));
      dirs.push_back(dir);
      dirs.push_back(dir + "/../lib/idemwatch");
    }
    dirs.emplace_back(IDEMWATCH_TLS_COMPAT_BUILD_DIR);
    for (const char* name :
         {"libidemwatch_civetweb_libssl.so", "libidemwatch_civetweb_libcrypto.so"}) {
      bool loaded = false;
      for (const std::string& dir : dirs) {
        const std::string path = dir + "/" + name;
        if (access(path.c_str(), R_OK) == 0 &&
            dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) {
          logDebug("loaded " + path + " for civetweb's TLS");
          loaded = true;
          break;
        }
      }
      if (!loaded)
        logWarn(std::string("TLS: ") + name + " not found; civetweb may fail to load OpenSSL 3");
    }
  });
}

}  // namespace

WebServer::WebServer(const WebServerSettings& settings,
                     std::shared_ptr<prometheus::Collectable> metrics)
    : gate_(std::make_unique<Gate>()), metrics_(std::move(metrics)) {
  gate_->telemetryPath = settings.telemetryPath;
  gate_->landingPage = landingPage(settings.telemetryPath);
  if (!settings.webConfig.basicAuthUsers.empty()) {
    gate_->auth = std::make_unique<BasicAuth>(settings.webConfig.basicAuthUsers);
  }

  // Before civetweb's first start in this process, TLS or not: civetweb may load OpenSSL then.
  loadTlsCompat();
  std::string port = civetwebListeningPort(settings.listenAddress);
  std::vector<std::string> options{"num_threads", std::to_string(settings.threads),
                                   "request_timeout_ms", "10000"};
  std::string pemFile;
  if (const auto& tls = settings.webConfig.tls) {
    tls_ = true;
    port += 's';
    pemFile = joinedPem(*tls);
    options.insert(options.end(),
                   {"ssl_certificate", pemFile, "ssl_protocol_version",
                    std::to_string(tls->protocolVersion), "ssl_verify_peer", tls->verifyPeer});
    if (tls->clientCaFile)
      options.insert(options.end(), {"ssl_ca_file", tls->clientCaFile->string()});
  }
  options.insert(options.begin(), {"listening_ports", port});

  CivetCallbacks callbacks;
  callbacks.begin_request = beginRequest;
  callbacks.log_message = logMessage;
  std::string errors;
  startErrors = &errors;
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(options, &callbacks);
  } catch (const std::exception& e) {
    startErrors = nullptr;
    if (!pemFile.empty()) unlink(pemFile.c_str());
    throw WebServerError("cannot serve on " + settings.listenAddress + (tls_ ? " with TLS" : "") +
                         ": " + (errors.empty() ? std::string(e.what()) : errors));
  }
  startErrors = nullptr;
  if (!pemFile.empty()) unlink(pemFile.c_str());
  exposer_->RegisterCollectable(metrics_, settings.telemetryPath);
  ports_ = exposer_->GetListeningPorts();
  std::lock_guard lock(gatesMutex);
  for (int p : ports_) gates[p] = gate_.get();
}

WebServer::~WebServer() {
  {
    std::lock_guard lock(gatesMutex);
    for (int p : ports_) {
      const auto it = gates.find(p);
      if (it != gates.end() && it->second == gate_.get()) gates.erase(it);
    }
  }
  exposer_.reset();  // stops civetweb's threads before the gate goes away
}

std::vector<int> WebServer::ports() const {
  return ports_;
}

}  // namespace idem::exporter

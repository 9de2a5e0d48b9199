#include "web_server.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <dlfcn.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "basic_auth.hpp"
#include "exporter_options.hpp"
#include "log.hpp"
#include "tls_context.hpp"

namespace idem::exporter {

namespace {

// The toolkit's rate_limit: a token bucket of `burst` tokens, one more every `interval`.
class RateLimiter {
 public:
  explicit RateLimiter(const RateLimit& limit)
      : limit_(limit), tokens_(limit.burst), last_(std::chrono::steady_clock::now()) {}
  bool allow() {
    if (limit_.interval.count() <= 0) return true;
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::duration<double> elapsed = now - last_;
    const std::chrono::duration<double> interval = limit_.interval;
    tokens_ = std::min<double>(limit_.burst, tokens_ + elapsed / interval);
    last_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  RateLimit limit_;
  std::mutex mutex_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

struct WebServer::Gate {
  std::string telemetryPath;
  std::unique_ptr<BasicAuth> auth;
  std::string landingPage;
  std::function<std::string()> landingStatus;
  // http_server_config.headers, as header lines for every response.
  std::string extraHeaders;
  std::unique_ptr<RateLimiter> rateLimiter;
  // With extra headers the gate answers scrapes itself: prometheus-cpp's handler writes its
  // response head alone.
  std::shared_ptr<prometheus::Collectable> metrics;
};

namespace {

// civetweb's callbacks carry no user pointer of ours (prometheus-cpp's CivetServer owns it), so
// the gate of each server is found by the port the request arrived on.
std::mutex gatesMutex;
std::map<int, WebServer::Gate*> gates;
// Messages civetweb reports while starting (bind and TLS errors), to explain a failed start.
thread_local std::string* startErrors = nullptr;

void noteStartError(const std::string& message) {
  *startErrors += (startErrors->empty() ? "" : "; ") + message;
}
// The TLS settings of the server being started, for civetweb's init_ssl callback (called while
// the server starts, on the starting thread).
thread_local const TlsServerConfig* startingTls = nullptr;

void respond(mg_connection* conn, int status, const char* reason, const std::string& contentType,
             const std::string& body, const std::string& extraHeaders = {}) {
  mg_printf(
      conn,
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
      status, reason, contentType.c_str(), body.size(), extraHeaders.c_str());
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::strcmp(info->request_method, "HEAD") != 0) mg_write(conn, body.data(), body.size());
}

std::string landingPage(const std::string& telemetryPath, const std::string& status = {});

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
  const std::string& headers = gate.extraHeaders;

  if (gate.rateLimiter && !gate.rateLimiter->allow()) {
    respond(conn, 429, "Too Many Requests", "text/plain; charset=utf-8", "Too Many Requests\n",
            headers);
    return 1;
  }
  if (gate.auth && gate.auth->enabled()) {
    const char* header = mg_get_header(conn, "Authorization");
    if (header == nullptr || !gate.auth->allows(header)) {
      respond(conn, 401, "Unauthorized", "text/plain; charset=utf-8", "Unauthorized\n",
              headers + "WWW-Authenticate: Basic realm=\"idemwatch-exporter\"\r\n");
      return 1;
    }
  }
  const std::string path = info->local_uri != nullptr ? info->local_uri : "";
  const bool get = std::strcmp(info->request_method, "GET") == 0 ||
                   std::strcmp(info->request_method, "HEAD") == 0;
  if (path == gate.telemetryPath) {
    if (!get) {
      respond(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8", "Method Not Allowed\n",
              headers + "Allow: GET, HEAD\r\n");
      return 1;
    }
    if (!gate.metrics) return 0;
    respond(conn, 200, "OK", "text/plain; charset=utf-8",
            prometheus::TextSerializer().Serialize(gate.metrics->Collect()), headers);
    return 1;
  }
  if (path == "/" && get) {
    respond(conn, 200, "OK", "text/html; charset=utf-8",
            gate.landingStatus ? landingPage(gate.telemetryPath, gate.landingStatus())
                               : gate.landingPage,
            headers);
    return 1;
  }
  respond(conn, 404, "Not Found", "text/plain; charset=utf-8", "Not Found\n", headers);
  return 1;
}

// civetweb's init_ssl: the whole TLS set-up is ours (1), so civetweb neither loads a certificate
// nor the system's trust store.
int initSsl(void* sslCtx, void*) {
  if (startingTls == nullptr) return -1;
  try {
    configureTlsContext(sslCtx, *startingTls);
    return 1;
  } catch (const std::exception& e) {
    if (startErrors != nullptr) noteStartError(e.what());
    return -1;
  }
}

// While starting, civetweb's messages explain a failure (bind, TLS set-up); once serving, they are
// about single connections (a plain-HTTP client on the TLS port, a port scanner) and go to debug,
// so that strangers cannot fill the log.
int logMessage(const mg_connection*, const char* message) {
  if (startErrors != nullptr) {
    noteStartError(message);
    logWarn(std::string("web server: ") + message);
  } else {
    logDebug(std::string("web server: ") + message);
  }
  return 1;
}

std::string landingPage(const std::string& telemetryPath, const std::string& status) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>idemwatch "
         "exporter</title></head>\n"
         "<body><h1>idemwatch exporter</h1>\n"
         "<p>Idempotency figures of the idem schema for Prometheus.</p>\n"
         "<p><a href=\"" +
         telemetryPath + "\">Metrics</a></p>\n" +
         (status.empty() ? std::string() : "<p>" + status + "</p>\n") + "<p>" + versionText() +
         "</p>\n</body></html>\n";
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
  const WebConfig& config = settings.webConfig;
  gate_->telemetryPath = settings.telemetryPath;
  gate_->landingPage = landingPage(settings.telemetryPath);
  gate_->landingStatus = settings.landingStatus;
  if (!config.basicAuthUsers.empty())
    gate_->auth = std::make_unique<BasicAuth>(config.basicAuthUsers);
  for (const auto& [name, value] : config.headers)
    gate_->extraHeaders += name + ": " + value + "\r\n";
  if (!config.headers.empty()) gate_->metrics = metrics_;
  if (config.rateLimit.interval.count() > 0)
    gate_->rateLimiter = std::make_unique<RateLimiter>(config.rateLimit);

  // Before civetweb's first start in this process, TLS or not: civetweb may load OpenSSL then.
  loadTlsCompat();
  std::string port = civetwebListeningPort(settings.listenAddress);
  // No keep-alive (civetweb's default): a connection is one request, so an idle client holds a
  // thread no longer than the header timeout. No linger: closing never waits for the client.
  std::vector<std::string> options{"num_threads",        std::to_string(settings.threads),
                                   "request_timeout_ms", std::to_string(kHeaderTimeoutMs),
                                   "enable_keep_alive",  "no"};
  CivetCallbacks callbacks;
  callbacks.begin_request = beginRequest;
  callbacks.log_message = logMessage;
  if (config.tls) {
    tls_ = true;
    port += 's';
    tlsConfig_ = std::make_unique<TlsServerConfig>(*config.tls);
    callbacks.init_ssl = initSsl;
  }
  options.insert(options.begin(), {"listening_ports", port});

  std::string errors;
  startErrors = &errors;
  startingTls = tlsConfig_.get();
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(options, &callbacks);
  } catch (const std::exception& e) {
    startErrors = nullptr;
    startingTls = nullptr;
    throw WebServerError("cannot serve on " + settings.listenAddress + (tls_ ? " with TLS" : "") +
                         ": " + (errors.empty() ? std::string(e.what()) : errors));
  }
  startErrors = nullptr;
  startingTls = nullptr;
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

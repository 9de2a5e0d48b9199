// TLS as --web.config.file asks, set on the SSL_CTX civetweb hands to its init_ssl callback: the
// certificate and key (from files or inline), the TLS versions, cipher suites and curves, and
// the client-certificate policy. Client certificates are verified against the configured client
// CAs only: the context's trust store starts empty and the system's default paths are never
// loaded (civetweb's own set-up would load them: ssl_default_verify_paths defaults to yes).
#pragma once

#include "web_config.hpp"

namespace idem::exporter {

// Configures `sslCtx` (an SSL_CTX*) for `tls`, which must outlive the context: the verify
// callback reads client_allowed_sans from it. Throws std::runtime_error with OpenSSL's reason.
void configureTlsContext(void* sslCtx, const TlsServerConfig& tls);

}  // namespace idem::exporter

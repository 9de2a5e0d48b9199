// TLS as --web.config.file asks, set on the web server's SSL_CTX: the certificate and key (from
// files or inline), the TLS versions, cipher suites and curves, and the client-certificate policy.
// Client certificates are verified against the configured client CAs only: the context's trust
// store starts empty and the system's default paths are never loaded.
#pragma once

#include "idem/web/web_config.hpp"

namespace idem {

// Configures `sslCtx` (an SSL_CTX*) for `tls`, which must outlive the context: the verify
// callback reads client_allowed_sans from it. Throws std::runtime_error with OpenSSL's reason.
void configureTlsContext(void* sslCtx, const TlsServerConfig& tls);

}  // namespace idem

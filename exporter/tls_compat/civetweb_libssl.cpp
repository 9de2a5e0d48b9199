// Debian bookworm's civetweb 1.15 is built against the OpenSSL 1.1 API and loads OpenSSL at run
// time with dlopen("libssl.so"), then looks its functions up by name. Bookworm has OpenSSL 3,
// where one of them, SSL_get_peer_certificate, became a macro for SSL_get1_peer_certificate and
// is no longer exported, so civetweb refuses to start TLS.
//
// This library is loaded by the exporter before civetweb starts TLS. Its soname is "libssl.so",
// so the dynamic linker hands it to civetweb's dlopen("libssl.so"); civetweb's dlsym() then finds
// the one missing function here and every other one in libssl.so.3, which this library depends on.
extern "C" {

struct ssl_st;
struct x509_st;

x509_st* SSL_get1_peer_certificate(const ssl_st* ssl);

__attribute__((visibility("default"))) x509_st* SSL_get_peer_certificate(const ssl_st* ssl) {
  return SSL_get1_peer_certificate(ssl);
}

}  // extern "C"

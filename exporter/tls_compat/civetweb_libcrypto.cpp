// civetweb also loads dlopen("libcrypto.so"), a name only libssl-dev provides. This library's
// soname is "libcrypto.so" and it depends on libcrypto.so.3, so civetweb finds every function
// there without the development package (see civetweb_libssl.cpp).
extern "C" __attribute__((visibility("default"))) int idemwatch_civetweb_libcrypto_compat() {
  return 3;
}

#include "idem/web/tls_context.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace idem {
namespace {

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

[[noreturn]] void fail(const std::string& what) {
  const unsigned long code = ERR_get_error();
  char reason[256] = "";
  if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
  ERR_clear_error();
  throw std::runtime_error(what + (code != 0 ? std::string(": ") + reason : std::string()));
}

std::vector<Cert> certificates(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  std::vector<Cert> out;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    out.emplace_back(cert, &X509_free);
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

int configIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// The client certificate's DNS, e-mail, IP and URI SANs, as Go's crypto/x509 spells them.
std::vector<std::string> subjectAltNames(X509* cert) {
  std::vector<std::string> names;
  using Names = std::unique_ptr<GENERAL_NAMES, void (*)(GENERAL_NAMES*)>;
  Names sans(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)),
      [](GENERAL_NAMES* n) { GENERAL_NAMES_free(n); });
  if (!sans) return names;
  for (int i = 0; i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans.get(), i);
    if (name->type == GEN_DNS || name->type == GEN_EMAIL || name->type == GEN_URI) {
      const ASN1_IA5STRING* s = name->d.ia5;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<std::size_t>(ASN1_STRING_length(s)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = "";
      if ((length == 4 || length == 16) &&
          inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                    sizeof text) != nullptr) {
        names.emplace_back(text);  // as Go's net.IP.String(): 10.0.0.1, ::1
      }
    }
  }
  return names;
}

// Verification per client_auth_type: the policies that do not verify accept any chain, and
// client_allowed_sans is checked on the client's own certificate whatever the policy.
int verifyClient(int preverifyOk, X509_STORE_CTX* store) {
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  const auto* tls =
      static_cast<const TlsServerConfig*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), configIndex()));
  if (tls == nullptr) return 0;
  const bool verifies = tls->clientAuth == ClientAuth::VerifyClientCertIfGiven ||
                        tls->clientAuth == ClientAuth::RequireAndVerifyClientCert;
  if (verifies && preverifyOk == 0) return 0;
  if (X509_STORE_CTX_get_error_depth(store) != 0 || !tls->clientAllowedSans) return 1;
  X509* leaf = X509_STORE_CTX_get_current_cert(store);
  if (leaf == nullptr) return 0;
  for (const std::string& san : subjectAltNames(leaf)) {
    const auto& allowed = *tls->clientAllowedSans;
    if (std::find(allowed.begin(), allowed.end(), san) != allowed.end()) return 1;
  }
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

void setCertificateAndKey(SSL_CTX* ctx, const TlsServerConfig& tls) {
  std::vector<Cert> chain = certificates(tls.certPem);
  if (chain.empty() || SSL_CTX_use_certificate(ctx, chain.front().get()) != 1)
    fail("the TLS certificate cannot be used");
  for (std::size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1)
      fail("the TLS certificate chain cannot be used");
  }
  Bio bio(BIO_new_mem_buf(tls.keyPem.data(), static_cast<int>(tls.keyPem.size())), &BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    fail("the TLS key cannot be used");
}

void setProtocol(SSL_CTX* ctx, const TlsServerConfig& tls) {
  // No SSL_OP_NO_* left from a default: the toolkit's versions rule.
  SSL_CTX_clear_options(ctx, SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 |
                                 SSL_OP_NO_TLSv1_2 | SSL_OP_NO_TLSv1_3);
  // OpenSSL 3 allows TLS 1.0 and 1.1 only at security level 0; asked for, they are honoured.
  if (tls.minVersion < TlsVersion::Tls12) SSL_CTX_set_security_level(ctx, 0);
  if (SSL_CTX_set_min_proto_version(ctx, static_cast<int>(tls.minVersion)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, static_cast<int>(tls.maxVersion)) != 1) {
    fail("tls_server_config.min_version/max_version cannot be set");
  }
  if (!tls.cipherSuites.empty()) {
    std::string list;
    for (const std::string& c : tls.cipherSuites) list += (list.empty() ? "" : ":") + c;
    if (SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1)
      fail("tls_server_config.cipher_suites cannot be set (" + list + ")");
  }
  if (!tls.curves.empty()) {
    std::string list;
    for (const std::string& c : tls.curves) list += (list.empty() ? "" : ":") + c;
    if (SSL_CTX_set1_groups_list(ctx, list.c_str()) != 1)
      fail("tls_server_config.curve_preferences cannot be set (" + list + ")");
  }
  if (tls.preferServerCipherSuites)
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  else
    SSL_CTX_clear_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
}

void setClientVerification(SSL_CTX* ctx, const TlsServerConfig& tls) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);  // empty: nothing but the client CAs
  for (const Cert& ca : certificates(tls.clientCaPem)) {
    if (X509_STORE_add_cert(store, ca.get()) != 1 || SSL_CTX_add_client_CA(ctx, ca.get()) != 1)
      fail("a client CA certificate cannot be used");
  }
  int mode = SSL_VERIFY_NONE;
  switch (tls.clientAuth) {
    case ClientAuth::NoClientCert:
      break;
    case ClientAuth::RequestClientCert:
    case ClientAuth::VerifyClientCertIfGiven:
      mode = SSL_VERIFY_PEER;
      break;
    case ClientAuth::RequireAnyClientCert:
    case ClientAuth::RequireAndVerifyClientCert:
      mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      break;
  }
  // Without a certificate there is no SAN to allow (the toolkit refuses that connection too).
  if (tls.clientAllowedSans && mode != SSL_VERIFY_NONE) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (SSL_CTX_set_ex_data(ctx, configIndex(), const_cast<TlsServerConfig*>(&tls)) != 1)
    fail("the TLS settings cannot be attached");
  SSL_CTX_set_verify(ctx, mode, mode == SSL_VERIFY_NONE ? nullptr : verifyClient);
  // Sessions resumed with a client certificate need an id context.
  static const unsigned char id[] = "idemwatch";
  SSL_CTX_set_session_id_context(ctx, id, sizeof id - 1);
}

}  // namespace

void configureTlsContext(void* sslCtx, const TlsServerConfig& tls) {
  auto* ctx = static_cast<SSL_CTX*>(sslCtx);
  setCertificateAndKey(ctx, tls);
  setProtocol(ctx, tls);
  setClientVerification(ctx, tls);
}

}  // namespace idem

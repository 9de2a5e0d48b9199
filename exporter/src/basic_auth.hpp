// Basic auth against the bcrypt hashes of --web.config.file, checked with libcrypt's crypt_r
// (libxcrypt supports $2a$, $2b$ and $2y$). bcrypt is slow on purpose (tens of milliseconds at
// cost 10), so a successful check is remembered as a salted SHA-256 of user, password and hash:
// Prometheus scrapes every few seconds with the same credentials, and a scrape must stay fast.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace idem::exporter {

class BasicAuth {
 public:
  explicit BasicAuth(std::map<std::string, std::string> usersToBcryptHash);

  bool enabled() const { return !users_.empty(); }
  // The value of an Authorization header ("Basic dXNlcjpwYXNz"); false when absent or wrong.
  bool allows(std::string_view authorizationHeader) const;

 private:
  bool verify(const std::string& user, const std::string& password) const;
  std::string cacheKey(const std::string& user, const std::string& password,
                       const std::string& hash) const;

  std::map<std::string, std::string> users_;
  std::array<unsigned char, 32> salt_{};
  mutable std::mutex cacheMutex_;
  mutable std::set<std::string> verified_;
};

// RFC 4648 base64; empty when the text is not valid base64.
std::string decodeBase64(std::string_view text);

}  // namespace idem::exporter

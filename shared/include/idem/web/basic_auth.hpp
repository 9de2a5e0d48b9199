// Basic auth against the bcrypt hashes of --web.config.file, checked with libcrypt's crypt_r
// (libxcrypt supports $2a$, $2b$ and $2y$). bcrypt is slow on purpose (tens of milliseconds at
// cost 10), so a successful check is remembered as a salted SHA-256 of user, password and hash:
// Prometheus scrapes every few seconds with the same credentials, and a scrape must stay fast.
//
// What is not remembered costs a bcrypt run, and those runs go one at a time (as the exporter
// toolkit's bcryptMtx does): clients sending wrong passwords then use at most one core, however
// many they are, and a remembered scrape never waits for them. A check that cannot start within
// a second is refused unchecked, so that waiting clients do not pile up.
// Failed checks are remembered too, so a client repeating a wrong password costs nothing.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace idem {

class BasicAuth {
 public:
  explicit BasicAuth(std::map<std::string, std::string> usersToBcryptHash);

  bool enabled() const { return !users_.empty(); }
  // The value of an Authorization header ("Basic dXNlcjpwYXNz"); false when absent or wrong.
  bool allows(std::string_view authorizationHeader) const;
  // What was decided before for this header, without a bcrypt run: true (a login checked and
  // good), false (malformed, or checked and wrong), nullopt (never checked: allows() must run).
  std::optional<bool> remembered(std::string_view authorizationHeader) const;

  static constexpr std::chrono::milliseconds kVerificationWait{1000};

 private:
  bool verify(const std::string& user, const std::string& password) const;
  std::string cacheKey(const std::string& user, const std::string& password,
                       const std::string& hash) const;

  std::map<std::string, std::string> users_;
  std::array<unsigned char, 32> salt_{};
  mutable std::mutex cacheMutex_;
  mutable std::set<std::string> verified_;
  mutable std::set<std::string> refused_;
  mutable std::timed_mutex bcryptMutex_;  // one bcrypt run at a time
};

// RFC 4648 base64 with its padding, strictly; nullopt when the text is not valid base64.
std::optional<std::string> decodeBase64(std::string_view text);

// The user and password of an Authorization header, strictly: the scheme word "Basic" (in any
// case) and one space, valid base64, one colon between user and password, no control character
// (NUL included) in either. nullopt otherwise.
std::optional<std::pair<std::string, std::string>> basicCredentials(std::string_view header);

}  // namespace idem

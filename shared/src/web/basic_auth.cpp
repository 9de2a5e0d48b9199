#include "idem/web/basic_auth.hpp"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>

namespace idem {

std::optional<std::string> decodeBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  text.remove_suffix(padding);
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> basicCredentials(std::string_view header) {
  constexpr std::string_view scheme = "basic ";
  if (header.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return std::nullopt;
  }
  const std::optional<std::string> credentials = decodeBase64(header.substr(scheme.size()));
  if (!credentials) return std::nullopt;
  const bool control = std::any_of(credentials->begin(), credentials->end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  const std::size_t colon = credentials->find(':');
  if (control || colon == std::string::npos) return std::nullopt;
  return std::pair{credentials->substr(0, colon), credentials->substr(colon + 1)};
}

BasicAuth::BasicAuth(std::map<std::string, std::string> usersToBcryptHash)
    : users_(std::move(usersToBcryptHash)) {
  if (RAND_bytes(salt_.data(), static_cast<int>(salt_.size())) != 1) {
    throw std::runtime_error("no random bytes for the basic auth cache");
  }
}

bool BasicAuth::allows(std::string_view header) const {
  if (!enabled()) return true;
  const auto credentials = basicCredentials(header);
  return credentials && verify(credentials->first, credentials->second);
}

std::optional<bool> BasicAuth::remembered(std::string_view header) const {
  if (!enabled()) return true;
  const auto credentials = basicCredentials(header);
  if (!credentials) return false;
  const auto entry = users_.find(credentials->first);
  const std::string& hash = entry != users_.end() ? entry->second : users_.begin()->second;
  const std::string key = cacheKey(credentials->first, credentials->second, hash);
  std::lock_guard lock(cacheMutex_);
  if (entry != users_.end() && verified_.count(key) > 0) return true;
  if (refused_.count(key) > 0) return false;
  return std::nullopt;
}

std::string BasicAuth::cacheKey(const std::string& user, const std::string& password,
                                const std::string& hash) const {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 is not available");
  }
  EVP_DigestUpdate(ctx.get(), salt_.data(), salt_.size());
  for (const std::string* part : {&user, &password, &hash}) {
    const std::string length = std::to_string(part->size()) + ":";
    EVP_DigestUpdate(ctx.get(), length.data(), length.size());
    EVP_DigestUpdate(ctx.get(), part->data(), part->size());
  }
  std::string digest(EVP_MAX_MD_SIZE, '\0');
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(digest.data()), &size);
  digest.resize(size);
  return digest;
}

bool BasicAuth::verify(const std::string& user, const std::string& password) const {
  const auto entry = users_.find(user);
  // An unknown user still costs a bcrypt run, so response times do not tell which users exist.
  const std::string& hash = entry != users_.end() ? entry->second : users_.begin()->second;
  const std::string key = cacheKey(user, password, hash);
  {
    std::lock_guard lock(cacheMutex_);
    if (entry != users_.end() && verified_.count(key) > 0) return true;
    if (refused_.count(key) > 0) return false;
  }
  std::unique_lock turn(bcryptMutex_, std::defer_lock);
  if (!turn.try_lock_for(kVerificationWait)) return false;
  auto data = std::make_unique<crypt_data>();
  const char* computed = crypt_r(password.c_str(), hash.c_str(), data.get());
  const bool match = entry != users_.end() && computed != nullptr && computed[0] != '*' &&
                     std::string_view(computed).size() == hash.size() &&
                     CRYPTO_memcmp(computed, hash.data(), hash.size()) == 0;
  turn.unlock();
  std::lock_guard lock(cacheMutex_);
  std::set<std::string>& remembered = match ? verified_ : refused_;
  if (remembered.size() >= 256) remembered.clear();  // bounded: a few scrapers, a few users
  remembered.insert(key);
  return match;
}

}  // namespace idem

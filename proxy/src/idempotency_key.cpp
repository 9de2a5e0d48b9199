#include "idempotency_key.hpp"

#include <cctype>

namespace idem::proxy {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t';
}

// An RFC 8941 key: lcalpha or "*", then lcalpha, digits, "_", "-", ".", "*".
std::size_t skipKey(std::string_view s, std::size_t i) {
  if (i >= s.size() || !(std::islower(static_cast<unsigned char>(s[i])) || s[i] == '*')) return i;
  ++i;
  while (i < s.size()) {
    const char c = s[i];
    if (std::islower(static_cast<unsigned char>(c)) ||
        std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
        c == '*') {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

std::variant<std::monostate, std::string, KeyError> parseIdempotencyKey(
    const std::vector<std::string_view>& values) {
  if (values.empty()) return std::monostate{};
  if (values.size() > 1) {
    return KeyError{"Idempotency-Key is sent more than once; send exactly one"};
  }
  const std::string_view s = values.front();
  std::size_t i = 0;
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i == s.size()) return KeyError{"Idempotency-Key is empty"};
  if (s[i] != '"') {
    return KeyError{
        "Idempotency-Key must be a Structured Field string in double quotes, such as "
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324\""};
  }
  std::string key;
  ++i;
  bool closed = false;
  while (i < s.size()) {
    const char c = s[i++];
    if (c == '\\') {
      if (i == s.size() || (s[i] != '"' && s[i] != '\\')) {
        return KeyError{"Idempotency-Key has a backslash that escapes neither '\"' nor '\\'"};
      }
      key += s[i++];
    } else if (c == '"') {
      closed = true;
      break;
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      return KeyError{"Idempotency-Key holds a character outside printable ASCII"};
    } else {
      key += c;
    }
  }
  if (!closed) return KeyError{"Idempotency-Key's string is not closed with '\"'"};
  // Parameters (";name" or ";name=value") may follow an Item; they do not change the key.
  while (i < s.size() && s[i] == ';') {
    ++i;
    while (i < s.size() && isSpace(s[i])) ++i;
    const std::size_t end = skipKey(s, i);
    if (end == i) return KeyError{"Idempotency-Key has a malformed parameter"};
    i = end;
    if (i < s.size() && s[i] == '=') {
      ++i;
      while (i < s.size() && s[i] != ';' && s[i] != ',' && !isSpace(s[i])) ++i;
    }
  }
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i < s.size()) {
    if (s[i] == ',') return KeyError{"Idempotency-Key is a list; send exactly one key"};
    return KeyError{"Idempotency-Key has text after its string"};
  }
  if (key.empty()) return KeyError{"Idempotency-Key is an empty string"};
  return key;
}

}  // namespace idem::proxy

// Lower-case hexadecimal of bytes: how digests (SHA-256 of a file, a key, a request) are written.
#pragma once

#include <cstddef>
#include <string>

namespace idem {

inline std::string hexEncode(const unsigned char* data, std::size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 0x0f];
  }
  return out;
}

}  // namespace idem

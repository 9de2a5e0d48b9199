// The Idempotency-Key request header as the IETF httpapi draft defines it: one Structured Field
// (RFC 8941) Item whose bare value is a String. A token, a list, a number or a second header is
// refused with the reason, so the client hears what to fix rather than have its key misread.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace idem::proxy {

struct KeyError {
  std::string reason;
};

// `values`: every Idempotency-Key field line of the request, in order. Empty: no key.
// The key (unescaped), or why the header is not one.
std::variant<std::monostate, std::string, KeyError> parseIdempotencyKey(
    const std::vector<std::string_view>& values);

}  // namespace idem::proxy

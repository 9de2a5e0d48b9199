// An upstream's answer as the record keeps it (idem.complete's response payload, or the error a
// final idem.fail records), so that a repeat of the key is answered with the same status, fields
// and body: {"status": 201, "headers": [["content-type", "..."], ...], "body": "..."}, the body as
// "body_base64" when it is not UTF-8 text.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string>

namespace idem::proxy {

using StoredResponse = boost::beast::http::response<boost::beast::http::string_body>;

std::string encodeStoredResponse(const StoredResponse& response);

// Empty when `json` is not a response this proxy stored.
std::optional<StoredResponse> decodeStoredResponse(const std::string& json, unsigned version);

}  // namespace idem::proxy

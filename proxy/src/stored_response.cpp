#include "stored_response.hpp"

#include <openssl/evp.h>

#include <boost/beast/core/string.hpp>
#include <nlohmann/json.hpp>
#include <vector>

namespace idem::proxy {
namespace {

// What a replay must not repeat: the connection's own fields and the length, set anew.
bool stored(std::string_view name) {
  for (std::string_view skip : {"connection", "keep-alive", "transfer-encoding", "content-length",
                                "date", "trailer", "upgrade", "te"}) {
    if (boost::beast::iequals(skip, name)) return false;
  }
  return true;
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> unbase64(const std::string& text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(3 * text.size() / 4 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t size = static_cast<std::size_t>(n);
  // EVP_DecodeBlock counts the padding's bytes as data.
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '=' && size > 0; --i) --size;
  out.resize(size);
  return out;
}

}  // namespace

std::string encodeStoredResponse(const StoredResponse& response) {
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& field : response) {
    if (stored(field.name_string())) {
      headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
  }
  nlohmann::json doc{{"status", response.result_int()}, {"headers", headers}};
  doc["body"] = response.body();
  try {
    return doc.dump();
  } catch (const nlohmann::json::type_error&) {  // not UTF-8
    doc.erase("body");
    doc["body_base64"] = base64(response.body());
    return doc.dump();
  }
}

std::optional<StoredResponse> decodeStoredResponse(const std::string& json, unsigned version) {
  const auto doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object() || !doc.contains("status") || !doc["status"].is_number_integer() ||
      !doc.contains("headers") || !doc["headers"].is_array()) {
    return std::nullopt;
  }
  const int status = doc["status"].get<int>();
  if (status < 100 || status > 599) return std::nullopt;
  StoredResponse res{static_cast<boost::beast::http::status>(status), version};
  for (const auto& h : doc["headers"]) {
    if (!h.is_array() || h.size() != 2 || !h[0].is_string() || !h[1].is_string())
      return std::nullopt;
    res.insert(h[0].get<std::string>(), h[1].get<std::string>());
  }
  if (doc.contains("body") && doc["body"].is_string()) {
    res.body() = doc["body"].get<std::string>();
  } else if (doc.contains("body_base64") && doc["body_base64"].is_string()) {
    auto bytes = unbase64(doc["body_base64"].get<std::string>());
    if (!bytes) return std::nullopt;
    res.body() = std::move(*bytes);
  }
  return res;
}

}  // namespace idem::proxy

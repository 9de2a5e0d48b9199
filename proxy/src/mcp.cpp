#include "mcp.hpp"

#include <boost/beast/core/string.hpp>

namespace idem::proxy {
namespace {

bool isRequestId(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer();
}

std::optional<nlohmann::json> answerIn(const nlohmann::json& message, const nlohmann::json& id) {
  if (message.is_array()) {
    for (const auto& m : message) {
      if (auto found = answerIn(m, id)) return found;
    }
    return std::nullopt;
  }
  if (message.is_object() && message.contains("id") && message["id"] == id &&
      (message.contains("result") || message.contains("error"))) {
    return message;
  }
  return std::nullopt;
}

}  // namespace

std::optional<McpToolCall> parseToolCall(const nlohmann::json& message) {
  if (!message.is_object() || message.value("method", nlohmann::json()) != "tools/call" ||
      !message.contains("id") || !isRequestId(message["id"])) {
    return std::nullopt;
  }
  const auto params = message.value("params", nlohmann::json());
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return std::nullopt;
  }
  McpToolCall call;
  call.id = message["id"];
  call.tool = params["name"].get<std::string>();
  call.arguments = params.value("arguments", nlohmann::json::object());
  if (params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains(std::string(kMcpKeyField))) {
    call.key = params["_meta"][std::string(kMcpKeyField)];
  }
  return call;
}

std::vector<std::string> toolsCalledInBatch(const nlohmann::json& batch) {
  std::vector<std::string> tools;
  if (!batch.is_array()) return tools;
  for (const auto& m : batch) {
    if (m.is_object() && m.value("method", nlohmann::json()) == "tools/call" &&
        m.contains("params") && m["params"].is_object() && m["params"].contains("name") &&
        m["params"]["name"].is_string()) {
      tools.push_back(m["params"]["name"].get<std::string>());
    }
  }
  return tools;
}

std::optional<nlohmann::json> findAnswer(std::string_view contentType, const std::string& body,
                                         const nlohmann::json& id) {
  const auto semicolon = contentType.find(';');
  const std::string_view type = contentType.substr(0, semicolon);
  if (boost::beast::iequals(type, "text/event-stream")) {
    // Events are separated by a blank line; an event's data lines, joined by "\n", are its data.
    std::string data;
    std::size_t at = 0;
    auto flush = [&]() -> std::optional<nlohmann::json> {
      if (data.empty()) return std::nullopt;
      const auto message = nlohmann::json::parse(data, nullptr, false);
      data.clear();
      return message.is_discarded() ? std::nullopt : answerIn(message, id);
    };
    while (at <= body.size()) {
      std::size_t end = body.find('\n', at);
      if (end == std::string::npos) end = body.size();
      std::string_view line(body.data() + at, end - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        if (auto found = flush()) return found;
      } else if (line.rfind("data:", 0) == 0) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (!data.empty()) data += '\n';
        data += line;
      }
      at = end + 1;
    }
    return flush();
  }
  const auto message = nlohmann::json::parse(body, nullptr, false);
  if (message.is_discarded()) return std::nullopt;
  return answerIn(message, id);
}

std::string encodeAnswer(const nlohmann::json& id, std::string_view member,
                         const nlohmann::json& value, bool stream) {
  const nlohmann::json message{{"jsonrpc", "2.0"}, {"id", id}, {std::string(member), value}};
  return stream ? "event: message\ndata: " + message.dump() + "\n\n" : message.dump();
}

bool wantsStreamOnly(std::string_view accept) {
  const auto has = [&](std::string_view type) {
    std::size_t at = 0;
    while (at < accept.size()) {
      std::size_t end = std::min(accept.find(',', at), accept.size());
      std::string_view item = accept.substr(at, end - at);
      item = item.substr(0, item.find(';'));
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (boost::beast::iequals(item, type)) return true;
      at = end + 1;
    }
    return false;
  };
  return has("text/event-stream") && !has("application/json") && !has("*/*") &&
         !has("application/*");
}

}  // namespace idem::proxy

// MCP's Streamable HTTP transport as the proxy sees it: a POST carries one JSON-RPC message; the
// server answers it with a JSON body or with a server-sent event stream whose events carry
// JSON-RPC messages, the answer among them. Only `tools/call` requests of configured tools are
// claimed; the proxy stores the answer's `result` (or `error`) and replays it under the id of
// the request that repeats the key.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace idem::proxy {

// The field of params._meta that carries a tool call's idempotency key.
inline constexpr std::string_view kMcpKeyField = "io.idemwatch/idempotencyKey";

struct McpToolCall {
  nlohmann::json id;  // the JSON-RPC request's id: a string or a number
  std::string tool;
  nlohmann::json arguments;           // an object; {} when the call has none
  std::optional<nlohmann::json> key;  // params._meta[kMcpKeyField], as sent
};

// The tools/call request `message` carries, when it is one (a single request, not a batch).
std::optional<McpToolCall> parseToolCall(const nlohmann::json& message);

// The names of the tools called by a batch's tools/call requests (a JSON array of messages).
std::vector<std::string> toolsCalledInBatch(const nlohmann::json& batch);

// The JSON-RPC answer to request `id` in an upstream's body: a JSON body (one message or a batch)
// or a text/event-stream body, by `contentType`. Empty when the body holds none.
std::optional<nlohmann::json> findAnswer(std::string_view contentType, const std::string& body,
                                         const nlohmann::json& id);

// A JSON-RPC response to `id` carrying `member` ("result" or "error") = `value`, as the body of
// an application/json answer, or of a text/event-stream answer when `stream`.
std::string encodeAnswer(const nlohmann::json& id, std::string_view member,
                         const nlohmann::json& value, bool stream);

// True when the client's Accept field takes only an event stream, not JSON.
bool wantsStreamOnly(std::string_view accept);

}  // namespace idem::proxy

#pragma once
// Checking an LLM's reply: the arguments of its tool call (or JSON in its content) against the tool's
// JSON schema (data/agent/tools/*.json). Supports the subset those schemas use: type, properties,
// required, additionalProperties: false, items, enum, minItems/maxItems, minLength/maxLength, pattern.
// (Debian ships no C++ JSON-schema validator; this is that subset, no more.)
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::agent {

// A reply the agent cannot use; the message is sent back to the LLM as feedback.
class ReplyError : public std::runtime_error {
 public:
  explicit ReplyError(const std::string& m) : std::runtime_error(m) {}
};

// Throws ReplyError naming the JSON path and what was expected.
void validate_schema(const nlohmann::json& value, const nlohmann::json& schema, const std::string& path = "$");

// The arguments the assistant message gives for `tool`: from message.tool_calls[i].function.arguments
// (a JSON string) or, failing that, from its content (JSON, optionally inside a ```json fence).
// Validates them against `schema`. Throws ReplyError.
nlohmann::json reply_arguments(const nlohmann::json& message, const std::string& tool, const nlohmann::json& schema);

// data_dir()/agent/tools/<name>.json: {name, description, parameters}.
nlohmann::json load_tool(const std::string& name);

}  // namespace fact::agent

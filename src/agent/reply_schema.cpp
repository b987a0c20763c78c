#include "agent/reply_schema.h"

#include <fmt/format.h>

#include <regex>

#include "core/files.h"
#include "core/paths.h"

namespace fact::agent {
using nlohmann::json;

namespace {

bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

std::string clip(const std::string& s, size_t n = 80) { return s.size() > n ? s.substr(0, n) + "..." : s; }

}  // namespace

void validate_schema(const json& v, const json& schema, const std::string& path) {
  if (schema.contains("type")) {
    std::string t = schema["type"];
    if (!has_type(v, t)) throw ReplyError(fmt::format("{} must be {} {}, got {}", path, t == "array" || t == "object" ? "an" : "a", t, clip(v.dump())));
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) throw ReplyError(fmt::format("{} must be one of {}, got {}", path, schema["enum"].dump(), clip(v.dump())));
  }
  if (v.is_string()) {
    auto n = v.get<std::string>().size();
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>())
      throw ReplyError(fmt::format("{} must have at least {} characters", path, schema["minLength"].get<size_t>()));
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>())
      throw ReplyError(fmt::format("{} has {} characters; at most {} are allowed", path, n, schema["maxLength"].get<size_t>()));
    if (schema.contains("pattern") && !std::regex_search(v.get<std::string>(), std::regex(schema["pattern"].get<std::string>())))
      throw ReplyError(fmt::format("{} = \"{}\" does not match {}", path, clip(v.get<std::string>()), schema["pattern"].get<std::string>()));
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>())
      throw ReplyError(fmt::format("{} needs at least {} items", path, schema["minItems"].get<size_t>()));
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>())
      throw ReplyError(fmt::format("{} has {} items; at most {} are allowed", path, v.size(), schema["maxItems"].get<size_t>()));
    if (schema.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) validate_schema(v[i], schema["items"], fmt::format("{}[{}]", path, i));
  }
  if (v.is_object()) {
    for (const auto& r : schema.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) throw ReplyError(fmt::format("{} is missing the required field '{}'", path, r.get<std::string>()));
    const json props = schema.value("properties", json::object());
    for (const auto& [k, sub] : v.items()) {
      if (props.contains(k)) validate_schema(sub, props[k], path + "." + k);
      else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false)
        throw ReplyError(fmt::format("{} has an unknown field '{}'; allowed: {}", path, k, [&] {
          std::string s;
          for (const auto& [p, _] : props.items()) s += (s.empty() ? "" : ", ") + p;
          return s;
        }()));
    }
  }
}

json reply_arguments(const json& message, const std::string& tool, const json& schema) {
  if (!message.is_object()) throw ReplyError("the reply has no assistant message");
  std::string text;
  bool from_tool = false;
  if (message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty()) {
    for (const auto& call : message["tool_calls"]) {
      const json fn = call.value("function", json::object());
      if (fn.value("name", "") != tool) continue;
      if (!fn.contains("arguments") || !fn["arguments"].is_string())
        throw ReplyError(fmt::format("the {} call has no 'arguments' string", tool));
      text = fn["arguments"].get<std::string>();
      from_tool = true;
      break;
    }
    if (!from_tool) throw ReplyError(fmt::format("the reply calls {} but not {}", message["tool_calls"][0].value("function", json::object()).value("name", "?"), tool));
  } else if (message.contains("content") && message["content"].is_string()) {
    text = message["content"].get<std::string>();
    // Models often fence JSON in markdown; take the fenced block when there is one.
    auto open = text.find("```");
    if (open != std::string::npos) {
      auto line_end = text.find('\n', open);
      auto close = line_end == std::string::npos ? std::string::npos : text.find("```", line_end);
      if (close != std::string::npos) text = text.substr(line_end + 1, close - line_end - 1);
    }
  } else {
    throw ReplyError(fmt::format("the reply has neither a {} tool call nor JSON content", tool));
  }
  json args;
  try {
    args = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ReplyError(fmt::format("the {} is not valid JSON ({}); it starts: {}", from_tool ? "tool call's arguments" : "reply content",
                                 e.what(), clip(text, 120)));
  }
  validate_schema(args, schema, "arguments");
  return args;
}

json load_tool(const std::string& name) {
  return read_json_file(data_dir() / "agent" / "tools" / (name + ".json"), "agent tool schema");
}

}  // namespace fact::agent

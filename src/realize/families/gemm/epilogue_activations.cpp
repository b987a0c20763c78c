#include "realize/families/gemm/epilogue_activations.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::realize {
namespace {

constexpr const char* kTableFile = "epilogues/activations.json";

const nlohmann::json& table_json() {
  static const nlohmann::json table = [] {
    nlohmann::json j = read_json_file(data_dir() / kTableFile, "epilogue activation table");
    if (!j.contains("activations") || !j["activations"].is_object())
      throw Error(fmt::format("{}: expected an object \"activations\" of name -> entry", (data_dir() / kTableFile).string()));
    return j["activations"];
  }();
  return table;
}

const std::map<std::string, ActivationEntry>& entries() {
  static const std::map<std::string, ActivationEntry> table = [] {
    std::map<std::string, ActivationEntry> out;
    auto text = [](const nlohmann::json& e, const char* key) {
      return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
    };
    for (const auto& [name, e] : table_json().items()) {
      ActivationEntry a{name, text(e, "cutlass"), text(e, "cutlass2_output_op"), text(e, "fp32_accurate"),
                        e.value("torch", nlohmann::json::object()), text(e, "expr"), {}};
      const nlohmann::json params = e.value("params", nlohmann::json::object());
      for (const auto& [p, v] : params.items()) {
        if (!v.is_number())
          throw Error(fmt::format("{}: activation '{}': param '{}' needs a number default, got {}",
                                  (data_dir() / kTableFile).string(), name, p, v.dump()));
        a.params[p] = v.get<double>();
      }
      if ((a.cutlass.empty() && text(e, "expr").empty()) || !a.torch.contains("aten"))
        throw Error(fmt::format("{}: activation '{}' needs \"cutlass\" (the functor) or \"expr\", and \"torch\": {{\"aten\": ...}}",
                                (data_dir() / kTableFile).string(), name));
      out.emplace(name, std::move(a));
    }
    return out;
  }();
  return table;
}

}  // namespace

const ActivationEntry& activation_entry(const std::string& name) {
  auto it = entries().find(name);
  if (it == entries().end())
    throw Error(fmt::format("activation '{}' is not in data/{}: known {}; add an entry there to fuse it",
                            name, kTableFile, fmt::join(activation_names(), ", ")));
  return it->second;
}

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (const auto& [name, e] : entries()) names.push_back(name);
  return names;
}

nlohmann::json activation_table_json(const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& n : names) {
    activation_entry(n);
    out[n] = table_json()[n];
  }
  return out;
}

}  // namespace fact::realize

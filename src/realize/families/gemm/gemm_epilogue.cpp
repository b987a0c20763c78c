#include "realize/families/gemm/gemm_epilogue.h"

#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "realize/families/gemm/epilogue_activations.h"

namespace fact::realize {
namespace {

constexpr const char* kNamedFile = "epilogues/named.json";

// The predefined trees in the data file's order.
const std::vector<std::pair<std::string, EpilogueTree>>& named_trees() {
  static const std::vector<std::pair<std::string, EpilogueTree>> trees = [] {
    auto path = data_dir() / kNamedFile;
    // nlohmann::ordered_json keeps the file's order, the order messages list the names in.
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(read_text_file(path, "named epilogues"));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: {}; fix the JSON", path.string(), e.what()));
    }
    std::vector<std::pair<std::string, EpilogueTree>> out;
    if (!j.contains("epilogues") || !j["epilogues"].is_object())
      throw Error(fmt::format("{}: expected an object \"epilogues\" of name -> tree", path.string()));
    for (const auto& [name, tree] : j["epilogues"].items()) {
      try {
        out.emplace_back(name, EpilogueTree::from_json(nlohmann::json::parse(tree.dump())));
      } catch (const Error& e) {
        throw Error(fmt::format("{}: epilogue '{}': {}", path.string(), name, e.what()));
      }
    }
    return out;
  }();
  return trees;
}

}  // namespace

EpilogueTree Epilogue::named_tree(const std::string& name) {
  for (const auto& [n, tree] : named_trees())
    if (n == name) return tree;
  throw Error(fmt::format("unknown epilogue '{}': use one of {} (data/{}), or give the epilogue as a tree",
                          name, fmt::join(names(), ", "), kNamedFile));
}

std::vector<std::string> Epilogue::names() {
  std::vector<std::string> out;
  for (const auto& [n, tree] : named_trees()) out.push_back(n);
  return out;
}

Epilogue Epilogue::named(const std::string& name) {
  Epilogue e;
  e.tree = named_tree(name);
  e.name = name;
  return e;
}

Epilogue Epilogue::of(EpilogueTree tree) {
  Epilogue e;
  e.name.clear();
  for (const auto& [n, t] : named_trees())
    if (t == tree) e.name = n;
  e.tree = std::move(tree);
  return e;
}

nlohmann::json Epilogue::to_json() const { return name.empty() ? tree.to_json() : nlohmann::json(name); }

Epilogue Epilogue::from_json(const nlohmann::json& j) {
  if (j.is_string()) return named(j.get<std::string>());
  return of(EpilogueTree::from_json(j));
}

std::string to_string(const Epilogue& e) { return e.key(); }
Epilogue epilogue_from_string(const std::string& s) { return Epilogue::named(s); }

bool has_bias(const Epilogue& e) { return e.tree.reads_bias(); }
bool has_residual(const Epilogue& e) { return e.tree.reads_source("residual"); }

nlohmann::json epilogue_reference_json(const Epilogue& e) {
  return {{"epilogue_tree", e.tree.to_json()}, {"activations", activation_table_json(e.tree.activations())}};
}

}  // namespace fact::realize

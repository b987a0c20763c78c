#include "realize/kernel_family.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "realize/attention_family.h"
#include "realize/norm_family.h"
#include "realize/rope_family.h"
#include "realize/rowwise_family.h"

namespace fact::realize {

std::vector<const KernelFamily*> kernel_families() {
  return {&normalization_family(), &attention_family(), &rope_family(), &rowwise_family()};
}

const KernelFamily* kernel_family_named(const std::string& name) {
  for (const auto* f : kernel_families())
    if (f->name() == name) return f;
  return nullptr;
}

const KernelFamily* kernel_family_for(const discover::Match& match) {
  return kernel_family_named(match.kernel.value("family", match.family));
}

nlohmann::json family_data(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto j = read_json_file(data_dir() / "families" / (name + ".json"), "kernel family file");
  if (j.value("family", "") != name)
    throw Error(fmt::format("{}: \"family\" must be \"{}\"", (data_dir() / "families" / (name + ".json")).string(), name));
  return cache[name] = j;
}

const ir::Node* bound_node(const discover::Match& m, const ir::Graph& g, const nlohmann::json& var) {
  if (!var.is_string()) return nullptr;
  auto it = m.inputs.find(var.get<std::string>());
  if (it == m.inputs.end() || it->second.empty()) return nullptr;
  return g.find(it->second);
}

std::string family_template(const std::string& family, const char* key) {
  return family_data(family).at(key).get<std::string>();
}

std::string config_hash_id(const std::string& prefix, const nlohmann::json& config) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, as GemmConfig::id
  for (unsigned char ch : config.dump()) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{}{:012x}", prefix, h & 0xffffffffffffull);
}

}  // namespace fact::realize

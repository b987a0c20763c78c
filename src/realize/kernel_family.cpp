#include "realize/kernel_family.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::realize {
namespace fs = std::filesystem;

namespace {

std::vector<std::unique_ptr<KernelFamily>>& registered() {
  static std::vector<std::unique_ptr<KernelFamily>> families;
  return families;
}

}  // namespace

bool register_kernel_family(std::unique_ptr<KernelFamily> family) {
  registered().push_back(std::move(family));
  return true;
}

std::vector<const KernelFamily*> kernel_families() {
  // Checked against data/families once: each family needs its data file, each data file its family.
  static const std::vector<const KernelFamily*> families = [] {
    std::map<std::string, const KernelFamily*> by_name;
    for (const auto& f : registered()) by_name[f->name()] = f.get();
    std::vector<const KernelFamily*> out;
    fs::path dir = data_dir() / "families";
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      std::string name = entry.path().stem().string();
      auto it = by_name.find(name);
      if (it == by_name.end())
        throw Error(fmt::format("{} describes kernel family '{}', which this build of fact does not have (no "
                                "src/realize/families/<family>/ registers it)", entry.path().string(), name));
      out.push_back(it->second);
      by_name.erase(it);
    }
    if (!by_name.empty())
      throw Error(fmt::format("kernel family '{}' has no data file {}", by_name.begin()->first,
                              (dir / (by_name.begin()->first + ".json")).string()));
    std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name() < b->name(); });
    return out;
  }();
  return families;
}

const KernelFamily* kernel_family_named(const std::string& name) {
  for (const auto* f : kernel_families())
    if (f->name() == name) return f;
  return nullptr;
}

const KernelFamily* kernel_family_for(const discover::Match& match) {
  return kernel_family_named(match.kernel.value("family", match.family));
}

std::vector<std::string> kernel_family_names() {
  std::vector<std::string> names;
  for (const auto* f : kernel_families()) names.push_back(f->name());
  return names;
}

std::string KernelFamily::accuracy_shortfall(const nlohmann::json&, const CandidateRecord&, const TuneOutcome&) const {
  return "";
}

nlohmann::json OpCallSite::scalar(const char* key, bool boolean) const {
  nlohmann::json value = problem.is_object() ? problem.value(key, nlohmann::json(nullptr)) : nlohmann::json(nullptr);
  if (boolean ? !value.is_boolean() : !value.is_number())
    throw Error(fmt::format("{}: the tune report's problem has no {} \"{}\"; tune the pattern again", where,
                            boolean ? "boolean" : "number", key));
  return value;
}

std::string report_row_family(const nlohmann::json& row) {
  return row.is_object() && row.contains("family") && row["family"].is_string() ? row["family"].get<std::string>()
                                                                                 : "gemm";
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

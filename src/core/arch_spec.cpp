#include "core/arch_spec.h"

#include <cmath>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact {

namespace {

double positive_number(const nlohmann::json& doc, const char* field, const std::string& where) {
  if (!doc.contains(field)) throw Error(where + " is missing field '" + field + "'");
  const auto& v = doc[field];
  if (!v.is_number() || v.get<double>() <= 0)
    throw Error(where + " field '" + field + "' must be a positive number, got " + v.dump());
  return v.get<double>();
}

std::string string_field(const nlohmann::json& doc, const char* field, const std::string& where) {
  if (!doc.contains(field) || !doc[field].is_string())
    throw Error(where + " needs a string field '" + field + "'");
  return doc[field].get<std::string>();
}

}  // namespace

ArchSpec ArchSpec::load(const std::filesystem::path& path) {
  auto doc = read_json_file(path, "arch spec");
  const std::string where = "arch spec '" + path.string() + "'";
  if (!doc.is_object() || doc.value("format", "") != "fact-arch")
    throw Error(where + " is not a FACT arch spec (expected \"format\": \"fact-arch\")");
  ArchSpec a;
  a.name = string_field(doc, "name", where);
  a.arch = arch_from_string(a.name);
  a.device = string_field(doc, "device", where);
  a.source = string_field(doc, "source", where);
  a.sm_count = static_cast<int>(positive_number(doc, "sm_count", where));
  a.l2_bytes = positive_number(doc, "l2_bytes", where);
  a.dram_bytes_per_s = positive_number(doc, "dram_bytes_per_s", where);
  a.smem_per_sm_bytes = positive_number(doc, "smem_per_sm_bytes", where);
  a.launch_overhead_s = positive_number(doc, "launch_overhead_s", where);
  a.simt_flops = positive_number(doc, "simt_flops", where);
  if (!doc.contains("gemm_flops") || !doc["gemm_flops"].is_object())
    throw Error(where + " needs a 'gemm_flops' object: numerics mode (fp32, tf32, 3xtf32, bf16, fp16) -> FLOP/s");
  for (const auto& [mode, v] : doc["gemm_flops"].items())
    a.gemm_flops[mode] = positive_number(doc["gemm_flops"], mode.c_str(), where + " gemm_flops");
  return a;
}

ArchSpec ArchSpec::builtin(const std::string& arch) {
  auto path = data_dir() / "arch" / (arch + ".json");
  if (!std::filesystem::exists(path))
    throw Error("unknown architecture '" + arch + "': there is no " + path.string() +
                "; use sm80 or sm90, or add a spec file for it");
  return load(path);
}

const ArchSpec& ArchSpec::of(Arch arch) {
  static std::mutex mu;
  static std::map<Arch, ArchSpec> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(arch);
  return it != cache.end() ? it->second : cache.emplace(arch, builtin(to_string(arch))).first->second;
}

double ArchSpec::gemm_rate(Numerics numerics) const {
  auto it = gemm_flops.find(to_string(numerics));
  if (it == gemm_flops.end())
    throw Error("arch " + name + " has no GEMM rate for numerics '" + to_string(numerics) + "' (data/arch/" + name +
                ".json)");
  return it->second;
}

double ArchSpec::constant(const std::string& key) const {
  if (key == "sm_count") return sm_count;
  if (key == "l2_bytes") return l2_bytes;
  if (key == "dram_bytes_per_s") return dram_bytes_per_s;
  if (key == "smem_per_sm_bytes") return smem_per_sm_bytes;
  if (key == "launch_overhead_s") return launch_overhead_s;
  if (key == "simt_flops") return simt_flops;
  // gemm_flops_<mode>, e.g. gemm_flops_bf16
  const std::string prefix = "gemm_flops_";
  if (key.rfind(prefix, 0) == 0) {
    auto it = gemm_flops.find(key.substr(prefix.size()));
    if (it != gemm_flops.end()) return it->second;
  }
  throw Error("arch '" + name + "' has no constant '" + key +
              "'; known: sm_count, l2_bytes, dram_bytes_per_s, smem_per_sm_bytes, launch_overhead_s, simt_flops, "
              "gemm_flops_<mode>");
}

double wave_efficiency(double ctas, int sm_count) {
  if (ctas <= 0 || sm_count <= 0) return 1.0;
  double waves = std::ceil(ctas / sm_count);
  return ctas / (waves * sm_count);
}

}  // namespace fact

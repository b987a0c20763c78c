#pragma once
// Fills `{{name}}` slots in a template file. Strict both ways: a slot with no value and a value with
// no slot are errors, so a renamed key cannot silently produce a half-filled kernel.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fact::realize {

using TemplateValues = std::map<std::string, std::string>;

// A rendered source file of a kernel family (kernel .cu, op wrapper .cpp).
struct GeneratedSource {
  std::string config_id;       // kernel symbols are fact_<config_id>_*
  std::string template_name;   // e.g. "cutlass/gemm_sm90_collective.cu.in"
  std::string text;
};

// `what` names the template in errors (a file path or "inline template").
std::string render_template(const std::string& text, const TemplateValues& values, const std::string& what);
// Reads templates_dir()/relative_path and renders it.
std::string render_template_file(const std::filesystem::path& relative_path, const TemplateValues& values);
// Slot names in order of first appearance.
std::vector<std::string> template_slots(const std::string& text, const std::string& what);

}  // namespace fact::realize

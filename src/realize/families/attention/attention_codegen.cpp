#include "realize/families/attention/attention_codegen.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/paths.h"
#include "realize/kernel_family.h"

namespace fact::realize {

TemplateValues attention_kernel_values(const AttentionConfig& c) {
  return {{"config_id", c.id()},
          {"summary", c.summary()},
          {"element", cutlass_type(c.element)},
          {"numerics", to_string(c.numerics)},
          {"head_dim", std::to_string(c.head_dim)},
          {"block_m", std::to_string(c.block_m)},
          {"block_n", std::to_string(c.block_n)},
          {"warps", std::to_string(c.warps)},
          {"config_json", c.to_json().dump()}};
}

GeneratedSource render_attention_kernel(const AttentionConfig& c, const std::string& text, const std::string& what) {
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = what;
  out.text = render_template(text, attention_kernel_values(c), what);
  return out;
}

GeneratedSource generate_attention_kernel(const AttentionConfig& c) {
  const std::string name = c.template_name();
  if (!std::filesystem::exists(templates_dir() / name))
    throw Error("attention kernel template " + (templates_dir() / name).string() +
                " is not in this tree yet; PyTorch keeps attention until it lands");
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = name;
  out.text = render_template_file(name, attention_kernel_values(c));
  return out;
}

std::string attention_op_schema(const AttentionConfig& c) {
  return c.id() + "(Tensor q, Tensor k, Tensor v, float scale, bool causal) -> Tensor";
}

GeneratedSource generate_attention_op_wrapper(const AttentionConfig& c) {
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = family_template("attention", "op_template");
  out.text = render_template_file(out.template_name, {{"config_id", c.id()},
                                                      {"summary", c.summary()},
                                                      {"torch_dtype", torch_scalar_type(c.element)},
                                                      {"dtype", to_string(c.element)},
                                                      {"head_dim", std::to_string(c.head_dim)},
                                                      {"schema", attention_op_schema(c)}});
  return out;
}

}  // namespace fact::realize

#include "realize/family_codegen.h"

#include "realize/kernel_family.h"

namespace fact::realize {

TemplateValues json_slots(const nlohmann::json& config, std::initializer_list<const char*> keys) {
  TemplateValues v;
  for (const char* key : keys) {
    const nlohmann::json& value = config.at(key);
    v[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return v;
}

GeneratedSource render_family_template(const std::string& family, const char* key, const std::string& config_id,
                                       const TemplateValues& values) {
  GeneratedSource out;
  out.config_id = config_id;
  out.template_name = family_template(family, key);
  out.text = render_template_file(out.template_name, values);
  return out;
}

}  // namespace fact::realize

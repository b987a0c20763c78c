#pragma once
// The template slots every family's kernel and op wrapper share, and rendering a template a family's data file
// names; a family's codegen then lists only its own slots.
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "realize/template_renderer.h"

namespace fact::realize {

// The config's JSON fields `keys` as slots of the same names: strings as they are, numbers and booleans as
// JSON writes them ("128", "true").
TemplateValues json_slots(const nlohmann::json& config, std::initializer_list<const char*> keys);

// A kernel template's slots: config_id, summary, config_json, then the config's JSON fields `keys`.
template <class Config>
TemplateValues kernel_slots(const Config& c, std::initializer_list<const char*> keys) {
  const nlohmann::json j = c.to_json();
  TemplateValues v = json_slots(j, keys);
  v["config_id"] = c.id();
  v["summary"] = c.summary();
  v["config_json"] = j.dump();
  return v;
}

// An op wrapper template's slots: config_id, summary, schema, torch_dtype and dtype of the config's element,
// then the config's JSON fields `keys`.
template <class Config>
TemplateValues op_wrapper_slots(const Config& c, const std::string& schema, std::initializer_list<const char*> keys) {
  TemplateValues v = json_slots(c.to_json(), keys);
  v["config_id"] = c.id();
  v["summary"] = c.summary();
  v["schema"] = schema;
  v["torch_dtype"] = torch_scalar_type(c.element);
  v["dtype"] = to_string(c.element);
  return v;
}

// Renders the template that data/families/<family>.json names under `key` ("kernel_template", "op_template").
GeneratedSource render_family_template(const std::string& family, const char* key, const std::string& config_id,
                                       const TemplateValues& values);

}  // namespace fact::realize

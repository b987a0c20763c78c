// `fact registry list|show|export`: the user's pattern registry ($FACT_REGISTRY), where the agent keeps
// the patterns whose generated kernels passed verification; `fact discover` matches them from then on.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/command.h"
#include "discover/user_registry.h"

using namespace fact;
using nlohmann::json;

namespace {

struct RegistryOptions {
  std::string name;
  std::string dest;
  bool json_out = false;
};

void list_entries(bool as_json) {
  auto reg = discover::UserRegistry::open_default();
  auto entries = reg.list();
  if (as_json) {
    json rows = json::array();
    for (const auto& e : entries) rows.push_back({{"name", e.name}, {"dir", e.dir.string()}, {"record", e.record}});
    std::cout << rows.dump(1) << "\n";
    return;
  }
  std::cout << fmt::format("Pattern registry {} ({} entries)\n", reg.root().string(), entries.size());
  if (entries.empty()) return;
  std::cout << fmt::format("{:<32} {:<9} {:<6} {:<9} {:>10} {:>10}  {}\n", "name", "family", "arch", "dtype", "kernel us",
                           "torch us", "created");
  for (const auto& e : entries) {
    json p = e.record["verification"].value("profile", json::object());
    auto us = [&](const char* k) { return p.contains(k) ? fmt::format("{:.1f}", p[k].get<double>()) : std::string("-"); };
    std::cout << fmt::format("{:<32} {:<9} {:<6} {:<9} {:>10} {:>10}  {}\n", e.name, e.rule.value("family", "?"),
                             e.record.value("arch", "?"), e.record.value("dtype", "?"), us("kernel_us"), us("pytorch_us"),
                             e.record.value("created", ""));
  }
}

void show_entry(const std::string& name) {
  auto e = discover::UserRegistry::open_default().get(name);
  std::cout << fmt::format("{} ({})\n\nrule.json:\n{}\n\nrecord.json:\n{}\n\n{}: {} lines\n", e.name, e.dir.string(),
                           e.rule.dump(1), e.record.dump(1), e.record["kernel"]["source_file"].get<std::string>(),
                           std::count(e.kernel_source.begin(), e.kernel_source.end(), '\n'));
}

const bool registered = cli::register_command("registry", [](CLI::App& app) {
  auto o = std::make_shared<RegistryOptions>();
  auto* cmd = app.add_subcommand("registry", "The user's registry of generated, verified patterns ($FACT_REGISTRY)");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand("list", "List the registered patterns");
  list->add_flag("--json", o->json_out, "print JSON");
  list->callback([o] { list_entries(o->json_out); });
  auto* show = cmd->add_subcommand("show", "Show one pattern: rule, record (verification, profile), kernel");
  show->add_option("name", o->name, "registry name")->required();
  show->callback([o] { show_entry(o->name); });
  auto* exp = cmd->add_subcommand("export", "Copy patterns (all, or one) into a folder, one subfolder each");
  exp->add_option("dest", o->dest, "destination folder")->required();
  exp->add_option("--name", o->name, "only this pattern");
  exp->callback([o] {
    for (const auto& p : discover::UserRegistry::open_default().export_to(o->dest, o->name)) std::cout << p.string() << "\n";
  });
});

}  // namespace

// `fact examples search|show`: browse the kernels' example index (CUTLASS examples and FACT kernels).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/paths.h"
#include "discover/example_index.h"

namespace fact::cli {
namespace {
namespace fs = std::filesystem;
using discover::ExampleIndex;

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// CUTLASS paths are long and share one root; the table shows them under <cutlass>/ and names the root once.
std::string short_path(const fs::path& path, const fs::path& cutlass_root) {
  std::string p = path.string(), root = cutlass_root.string();
  if (!root.empty() && p.rfind(root + "/", 0) == 0) return "<cutlass>/" + p.substr(root.size() + 1);
  std::string home = fact_home().string();
  if (p.rfind(home + "/", 0) == 0) return p.substr(home.size() + 1);
  return p;
}

std::string fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

struct SearchArgs {
  std::string query, arch, family;
  bool compatible = false, as_json = false;
  size_t top = 5;
};

void run_search(const SearchArgs& a) {
  auto match = a.compatible ? discover::ArchMatch::compatible : discover::ArchMatch::exact;
  fs::path root = cutlass_dir();
  auto index = ExampleIndex::build(root / "examples", fact_home(), a.arch, match);
  auto hits = index.search(a.query, a.top, a.family);
  if (a.as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < hits.size(); ++i) {
      const auto& h = hits[i];
      out.push_back({{"rank", i + 1}, {"score", h.score}, {"ref", h.ref}, {"arch", h.arch}, {"family", h.family},
                     {"dtypes", h.dtypes}, {"epilogue", h.epilogue}, {"title", h.title}, {"path", h.path.string()},
                     {"snippet", h.snippet}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (hits.empty()) {
    std::cout << "no example matches \"" << a.query << "\"" << (a.arch.empty() ? "" : " for " + a.arch)
              << (a.compatible || a.arch.empty() ? "" : " (try --compatible to include older archs that run there)")
              << "\n";
    return;
  }
  std::cout << fmt::format("{:>2}  {:>6}  {:<52}  {:<11}  {:<14}  {:<56}  {}\n", "#", "score", "ref", "arch",
                           "family", "title", "path");
  for (size_t i = 0; i < hits.size(); ++i) {
    const auto& h = hits[i];
    std::cout << fmt::format("{:>2}  {:>6.2f}  {:<52}  {:<11}  {:<14}  {:<56}  {}\n", i + 1, h.score, fit(h.ref, 52),
                             fit(join(h.arch, ","), 11), fit(h.family, 14), fit(h.title, 56), short_path(h.path, root));
    if (!h.snippet.empty()) std::cout << "              | " << h.snippet << "\n";
  }
  std::cout << "<cutlass> = " << root.string() << "\n";
}

void run_show(const std::string& ref, bool as_json) {
  fs::path root = cutlass_dir();
  auto index = ExampleIndex::build(root / "examples", fact_home(), "");
  const discover::ExampleEntry& e = *index.resolve_refs({ref}).front();
  if (as_json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : e.files) files.push_back(f.string());
    nlohmann::json out = {{"ref", e.ref}, {"title", e.title}, {"path", e.path.string()}, {"arch", e.arch},
                          {"family", e.family}, {"dtypes", e.dtypes}, {"epilogue", e.epilogue},
                          {"tags", e.tags}, {"curated", e.curated}, {"files", files}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("ref       {}\ntitle     {}\npath      {}\narch      {}\nfamily    {}\ndtypes    {}\n"
                           "epilogue  {}\ntags      {}\nmetadata  {}\nfiles     {}\n",
                           e.ref, e.title, e.path.string(), join(e.arch, ", "), e.family, join(e.dtypes, ", "),
                           e.epilogue.empty() ? "-" : e.epilogue, e.tags.empty() ? "-" : join(e.tags, ", "),
                           e.curated ? "curated (data/examples)" : "guessed from the folder name", e.files.size());
  for (const auto& f : e.files) {
    std::error_code ec;
    auto size = fs::file_size(f, ec);
    std::string rel = fs::is_directory(e.path) ? fs::relative(f, e.path).string() : f.filename().string();
    std::cout << fmt::format("  {:>8}  {}\n", ec ? std::string("?") : std::to_string(size), rel);
  }
}

void setup(CLI::App& app) {
  auto* examples = app.add_subcommand("examples", "search and show the kernels' example index (CUTLASS examples, FACT kernels)");
  examples->require_subcommand(1);

  auto args = std::make_shared<SearchArgs>();
  auto* search = examples->add_subcommand("search", "rank examples by text relevance (BM25) for an architecture");
  search->add_option("query", args->query, "words to look for, e.g. \"hopper fused attention\"")->required();
  search->add_option("--arch", args->arch, "keep examples written for this arch (sm80, sm90, sm100...)");
  search->add_flag("--compatible", args->compatible,
                   "with --arch: also keep pre-sm90 examples of older archs, which run there too");
  search->add_option("--top", args->top, "how many to show")->check(CLI::PositiveNumber);
  search->add_option("--family", args->family, "keep one kernel family (gemm, attention, conv, ...)");
  search->add_flag("--json", args->as_json, "print JSON instead of a table");
  search->callback([args] { run_search(*args); });

  auto ref = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false);
  auto* show = examples->add_subcommand("show", "print an example's metadata and files");
  show->add_option("ref", *ref, "cutlass:<example folder> or fact:<kernel name>")->required();
  show->add_flag("--json", *show_json, "print JSON");
  show->callback([ref, show_json] { run_show(*ref, *show_json); });
}

const bool registered = register_command("examples", setup);

}  // namespace
}  // namespace fact::cli

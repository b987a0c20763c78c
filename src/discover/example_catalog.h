#pragma once
// What the example index knows about each example before any text search: its ref, title, target
// architectures, kernel family and files. Read from data/examples/*.json and the example folders.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace fact::discover {

struct ExampleEntry {
  std::string ref;                           // "cutlass:88_hopper_fmha" or "fact:<name>"
  std::string title;
  std::filesystem::path path;                // example folder, or FACT kernel file/folder (absolute)
  std::vector<std::string> arch;             // architectures it is written for: sm80, sm90, sm100...
  std::string family;                        // gemm, grouped_gemm, attention, conv, ...
  std::vector<std::string> dtypes;           // torch spelling: float16, bfloat16, float8_e4m3fn...
  std::string epilogue;                      // linear_combination, bias_relu, evt, softmax, ...
  std::vector<std::string> tags;             // extra search words from the metadata ("stream-k", "3xtf32")
  std::vector<std::filesystem::path> files;  // README and sources that the text search reads, sorted
  bool curated = false;                      // metadata from the data file, not guessed from the name
};

// How names map to architectures and families ("guess" in cutlass_examples.json): used for examples
// the metadata does not list, and to add generation words ("hopper") to an entry's search terms.
struct ExampleNaming {
  std::vector<std::pair<std::string, std::vector<std::string>>> arch_by_word;  // first match wins
  std::vector<std::string> default_arch;
  std::vector<std::pair<std::string, std::string>> family_by_word;            // first match wins
  std::string default_family = "other";

  std::vector<std::string> guess_arch(const std::string& folder) const;
  std::string guess_family(const std::string& folder) const;
  std::vector<std::string> generation_words(const std::string& arch) const;  // sm90 -> {"hopper"}
};

// Architecture checks. An arch is written smNN ("sm90"); "sm_90", "sm90a" and "90" are accepted.
// Compatibility (ArchMatch::compatible): a kernel for an arch below sm90 also runs on every later arch,
// because it uses no arch-specific ("a") features; sm90 and later kernels (WGMMA/TMA, tcgen05, sm120
// MMA) run only on their own arch. ArchMatch::exact keeps only entries that list the arch itself.
enum class ArchMatch { exact, compatible };
int arch_number(const std::string& arch);          // -1 when not an arch name
std::string normalize_arch(const std::string& arch);  // "sm_90a" -> "sm90"; throws Error when not an arch
bool arch_matches(const std::vector<std::string>& entry_arch, const std::string& target, ArchMatch match);

// Reads cutlass_examples.json: the naming rules and the curated metadata per folder name.
struct CutlassMetadata {
  ExampleNaming naming;
  std::vector<ExampleEntry> curated;  // path and files left empty; ref is "cutlass:<folder>"
};
CutlassMetadata load_cutlass_metadata(const std::filesystem::path& metadata_file);

// Every numbered example folder (NN_name) under `examples_dir`, with curated metadata where listed and
// guessed metadata otherwise. Curated folders missing from `examples_dir` are skipped with a warning.
std::vector<ExampleEntry> load_cutlass_examples(const std::filesystem::path& examples_dir,
                                                const CutlassMetadata& metadata);

// FACT's own vetted kernels from fact_kernels.json; `path` is relative to `fact_home`. Entries whose
// file does not exist (yet) are skipped with a warning.
std::vector<ExampleEntry> load_fact_kernels(const std::filesystem::path& catalog_file,
                                            const std::filesystem::path& fact_home);

// README*, .cu/.cpp/.h/.hpp/.cuh (also template files such as x.cu.in) under `path`, recursively,
// sorted; a file path is returned as itself.
std::vector<std::filesystem::path> example_text_files(const std::filesystem::path& path);

}  // namespace fact::discover

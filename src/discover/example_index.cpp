#include "discover/example_index.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/paths.h"
#include "discover/code_tokenizer.h"

namespace fact::discover {
namespace fs = std::filesystem;

namespace {

// The top of a file says what it is for; past this, code adds length more than meaning.
constexpr size_t kMaxBytesPerFile = 32 * 1024;
// A match in the title or name is worth this many matches in the body.
constexpr double kHeadWeight = 2.5;

// Reads up to kMaxBytesPerFile, without the licence block every CUTLASS file starts (or ends) with.
std::string read_capped_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(kMaxBytesPerFile, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text.compare(first, 2, "/*") == 0) {
    size_t end = text.find("*/", first + 2);
    if (end != std::string::npos) {
      std::string_view block(text.data() + first, end - first);
      if (block.find("SPDX-License-Identifier") != std::string_view::npos || block.find("Copyright") != std::string_view::npos)
        text.erase(0, end + 2);
    }
  }
  size_t notice = text.find("\n# Copyright");
  if (notice != std::string::npos) text.resize(notice);
  return text;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string head_text(const ExampleEntry& e, const ExampleNaming& naming) {
  std::string text = e.ref.substr(e.ref.find(':') + 1) + " " + e.title + " " + e.family + " " + e.epilogue + " " +
                     join(e.dtypes, " ") + " " + join(e.tags, " ") + " " + join(e.arch, " ");
  for (const auto& a : e.arch) text += " " + join(naming.generation_words(a), " ");
  return text;
}

std::string clean_line(std::string line) {
  size_t start = line.find_first_not_of(" \t/*#!>-");
  line = start == std::string::npos ? "" : line.substr(start);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.size() > 160) line = line.substr(0, 157) + "...";
  return line;
}

// README first, then the rest in path order: prose explains better than code.
std::string best_snippet(const ExampleEntry& e, const std::vector<std::string>& query) {
  std::set<std::string> wanted(query.begin(), query.end());
  std::vector<fs::path> files = e.files;
  std::stable_partition(files.begin(), files.end(), [](const fs::path& p) {
    std::string name = p.filename().string();
    return name.rfind("README", 0) == 0 || name.rfind("readme", 0) == 0;
  });
  std::string best;
  size_t best_rank = 0;
  for (const auto& f : files) {
    std::string text = read_capped_text(f);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      std::set<std::string> hits;
      for (auto& t : tokenize_code(line))
        if (wanted.count(t)) hits.insert(t);
      if (hits.empty()) continue;
      // Twice the matched terms, plus one for prose: a comment line reads better than a statement.
      bool code = line.find_first_of(";{}<>=") != std::string_view::npos;
      size_t rank = 2 * hits.size() + (code ? 0 : 1);
      if (rank > best_rank) {
        std::string cleaned = clean_line(std::string(line));
        if (cleaned.empty()) continue;
        best_rank = rank;
        best = cleaned;
        if (rank == 2 * wanted.size() + 1) return best;
      }
    }
  }
  return best;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

ExampleIndex ExampleIndex::build(const fs::path& cutlass_examples_dir, const fs::path& fact_home,
                                 const std::string& arch, ArchMatch match) {
  ExampleIndex index;
  index.arch_ = arch.empty() ? "" : normalize_arch(arch);
  index.match_ = match;
  fs::path data = fact_home / "data" / "examples";
  CutlassMetadata metadata = load_cutlass_metadata(data / "cutlass_examples.json");
  if (!cutlass_examples_dir.empty()) index.entries_ = load_cutlass_examples(cutlass_examples_dir, metadata);
  if (fs::exists(data / "fact_kernels.json")) {
    for (auto& e : load_fact_kernels(data / "fact_kernels.json", fact_home)) index.entries_.push_back(std::move(e));
  } else {
    spdlog::warn("example index: no {}; FACT's own kernels are not indexed", (data / "fact_kernels.json").string());
  }
  for (const auto& e : index.entries_) {
    std::vector<std::string> body;
    for (const auto& f : e.files) {
      auto tokens = tokenize_code(read_capped_text(f));
      body.insert(body.end(), tokens.begin(), tokens.end());
    }
    index.body_.add(body);
    index.head_.add(tokenize_code(head_text(e, metadata.naming)));
  }
  return index;
}

ExampleIndex ExampleIndex::builtin(const std::string& arch, ArchMatch match) {
  return build(cutlass_dir() / "examples", fact_home(), arch, match);
}

bool ExampleIndex::selects(const ExampleEntry& entry) const {
  return arch_.empty() || arch_matches(entry.arch, arch_, match_);
}

std::vector<ExampleHit> ExampleIndex::search(const std::string& query, size_t top_k, const std::string& family) const {
  auto terms = tokenize_code(query);
  auto body = body_.score(terms);
  auto head = head_.score(terms);
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t i = 0; i < entries_.size(); ++i) {
    double score = body[i] + kHeadWeight * head[i];
    if (score <= 0 || !selects(entries_[i]) || (!family.empty() && entries_[i].family != family)) continue;
    ranked.emplace_back(score, i);
  }
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return entries_[a.second].ref < entries_[b.second].ref;
  });
  if (ranked.size() > top_k) ranked.resize(top_k);
  std::vector<ExampleHit> hits;
  for (const auto& [score, i] : ranked) {
    const ExampleEntry& e = entries_[i];
    hits.push_back({e.ref, e.title, e.path, e.arch, e.family, e.dtypes, e.epilogue, score, best_snippet(e, terms)});
  }
  return hits;
}

const ExampleEntry* ExampleIndex::find(const std::string& ref) const {
  for (const auto& e : entries_)
    if (e.ref == ref) return &e;
  return nullptr;
}

std::vector<const ExampleEntry*> ExampleIndex::resolve_refs(const std::vector<std::string>& refs) const {
  std::vector<const ExampleEntry*> out;
  for (const auto& ref : refs) {
    if (const ExampleEntry* e = find(ref)) {
      out.push_back(e);
      continue;
    }
    std::vector<std::pair<size_t, std::string>> near;
    for (const auto& e : entries_) {
      std::string name = e.ref.substr(e.ref.find(':') + 1);
      std::string asked = ref.substr(ref.find(':') == std::string::npos ? 0 : ref.find(':') + 1);
      // A shared example number ("88_...") is a strong hint even when the rest is misspelled.
      size_t d = std::min(edit_distance(ref, e.ref), edit_distance(asked, name));
      if (!asked.empty() && name.rfind(asked.substr(0, asked.find('_')) + "_", 0) == 0) d = std::min<size_t>(d, 1);
      near.emplace_back(d, e.ref);
    }
    std::sort(near.begin(), near.end());
    std::vector<std::string> names;
    for (size_t i = 0; i < near.size() && i < 3; ++i) names.push_back(near[i].second);
    std::string form = (ref.rfind("cutlass:", 0) == 0 || ref.rfind("fact:", 0) == 0)
                           ? ""
                           : " (refs are written cutlass:<example folder> or fact:<kernel name>)";
    throw Error("unknown example ref '" + ref + "'" + form +
                (names.empty() ? std::string("; the example index is empty") : "; nearest: " + join(names, ", ")) +
                ". Fix the ref, or list refs with `fact examples search`");
  }
  return out;
}

}  // namespace fact::discover

// `fact db list`, `show ID`, `forget ID... [--matching TEXT]`, `export FILE`, `import FILE`: the tuning database
// that `fact tune` fills.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "realize/tuning_db.h"
#include "realize/tuning_db_exchange.h"

namespace fact::cli {
namespace {

std::string ms_text(const std::optional<double>& ms) { return ms ? fmt::format("{:.4f}", *ms) : "-"; }
std::string err_text(const std::optional<double>& e) { return e ? fmt::format("{:.2e}", *e) : "-"; }

// "m=4096 n=4096 k=4096 batch=1" for an object shape (GEMM order first, then the rest by name),
// "4096x4096" for an array, else the JSON itself.
std::string shape_text(const nlohmann::json& shape) {
  std::string out;
  if (shape.is_object()) {
    auto add = [&](const std::string& k, const nlohmann::json& v) {
      out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    };
    const std::vector<std::string> first = {"m", "n", "k", "batch"};
    for (const auto& k : first)
      if (shape.contains(k)) add(k, shape[k]);
    for (auto& [k, v] : shape.items())
      if (std::find(first.begin(), first.end(), k) == first.end()) add(k, v);
  } else if (shape.is_array()) {
    for (auto& v : shape) out += (out.empty() ? "" : "x") + v.dump();
  } else {
    out = shape.dump();
  }
  return out;
}

std::string workload_text(const WorkloadKey& key) {
  return fmt::format("{} {} {} {}", key.pattern, shape_text(key.shape), key.dtype, key.layout);
}

// Prints rows under a header with columns padded to their widest cell; `right` marks numeric columns.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      line += right[c] ? fmt::format("{:>{}}", row[c], width[c]) : fmt::format("{:<{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

void list(const std::string& db_path) {
  auto db = TuningDb::open(db_path.empty() ? default_tuning_db_path() : std::filesystem::path(db_path));
  auto workloads = db.list_workloads();
  if (workloads.empty()) {
    std::cout << "no workloads in " << db.path().string() << " yet; `fact tune` records them\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : workloads) {
    auto speedup = w.speedup();
    rows.push_back({std::to_string(w.id), workload_text(w.key), w.key.numerics, w.key.arch,
                    fmt::format("{}/{}", w.ok_candidates, w.candidates), w.winner.empty() ? "-" : w.winner,
                    ms_text(w.best_ms), ms_text(w.baseline_ms), speedup ? fmt::format("{:.2f}x", *speedup) : "-"});
  }
  print_table({"ID", "WORKLOAD", "NUMERICS", "ARCH", "OK/CANDS", "WINNER", "BEST MS", "BASELINE MS", "SPEEDUP"}, rows,
              {true, false, false, false, true, false, true, true, true});
  std::cout << workloads.size() << " workload(s) in " << db.path().string() << "\n";
}

void show(const std::string& db_path, long long id, bool as_json) {
  auto db = TuningDb::open(db_path.empty() ? default_tuning_db_path() : std::filesystem::path(db_path));
  auto detail = db.show_workload(id);
  if (!detail)
    throw Error(fmt::format("no workload {} in tuning database '{}'; `fact db list` shows the ids", id,
                            db.path().string()));
  if (as_json) {
    std::cout << to_json(*detail).dump(2) << "\n";
    return;
  }
  const auto& w = detail->summary;
  auto speedup = w.speedup();
  std::cout << fmt::format("workload {}: {}\n", w.id, workload_text(w.key))
            << fmt::format("  numerics {}, arch {}, CUTLASS {}, nvcc {}\n", w.key.numerics, w.key.arch,
                           w.key.cutlass_version, w.key.nvcc_version)
            << fmt::format("  device {}; created {}, updated {}\n", w.device_name.empty() ? "-" : w.device_name,
                           w.created_at, w.updated_at)
            << fmt::format("  baseline {}: {} ms, rel err {}, max abs err {}\n",
                           detail->baseline.name.empty() ? "-" : detail->baseline.name, ms_text(detail->baseline.time_ms),
                           err_text(detail->baseline.rel_err), err_text(detail->baseline.max_abs_err))
            << fmt::format("  winner {} ({} ms, speedup {})\n\n", w.winner.empty() ? "undecided" : w.winner,
                           ms_text(w.best_ms), speedup ? fmt::format("{:.2f}x", *speedup) : "-");
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : detail->candidates) {
    std::string message = c.message.substr(0, c.message.find('\n'));  // first line; --json has it all
    if (message.size() > 80) message = message.substr(0, 77) + "...";
    rows.push_back({c.config_id == w.winner ? "*" : "", c.config_id, c.status, ms_text(c.time_ms), err_text(c.rel_err),
                    err_text(c.max_abs_err), message});
  }
  print_table({"", "CONFIG", "STATUS", "MS", "REL ERR", "MAX ABS ERR", "MESSAGE"}, rows,
              {false, false, false, true, true, true, false});
}

[[maybe_unused]] const bool registered = register_command("db", [](CLI::App& app) {
  auto* db = app.add_subcommand("db", "list, show, forget, export and import the tuning database (what `fact tune` "
                                      "measured)");
  db->require_subcommand(1);
  auto db_path = std::make_shared<std::string>();
  const std::string db_help = "tuning database (default: $FACT_TUNING_DB, else ~/.cache/fact/tuning.sqlite)";

  auto* list_cmd = db->add_subcommand("list", "one line per tuned workload: winner, best and baseline time, speedup");
  list_cmd->add_option("--db", *db_path, db_help);
  list_cmd->callback([db_path] { list(*db_path); });

  auto* show_cmd = db->add_subcommand("show", "one workload with all its candidates");
  auto id = std::make_shared<long long>(0);
  auto as_json = std::make_shared<bool>(false);
  show_cmd->add_option("ID", *id, "workload id, as `fact db list` prints it")->required();
  show_cmd->add_option("--db", *db_path, db_help);
  show_cmd->add_flag("--json", *as_json, "print the workload and candidates as JSON");
  show_cmd->callback([db_path, id, as_json] { show(*db_path, *id, *as_json); });

  auto ids = std::make_shared<std::vector<long long>>();
  auto matching = std::make_shared<std::vector<std::string>>();
  auto* forget_cmd = db->add_subcommand("forget", "remove workloads (candidates, baseline, winner) so the next tune "
                                                  "measures them again");
  forget_cmd->add_option("ID", *ids, "workload ids, as `fact db list` prints them");
  forget_cmd->add_option("--matching", *matching,
                         "also every workload whose `fact db list` text holds this (repeated: all of them), e.g. "
                         "\"groups=144\" or \"k=1000\"");
  forget_cmd->add_option("--db", *db_path, db_help);
  forget_cmd->callback([db_path, ids, matching] {
    if (ids->empty() && matching->empty()) throw Error("fact db forget: name workload ids, or --matching TEXT");
    auto tuning = TuningDb::open(db_path->empty() ? default_tuning_db_path() : std::filesystem::path(*db_path));
    for (const auto& w : matching->empty() ? std::vector<WorkloadSummary>{} : tuning.list_workloads()) {
      const std::string text = workload_text(w.key);
      if (std::all_of(matching->begin(), matching->end(),
                      [&](const std::string& m) { return text.find(m) != std::string::npos; }) &&
          std::find(ids->begin(), ids->end(), w.id) == ids->end())
        ids->push_back(w.id);
    }
    std::vector<long long> missing;
    int forgotten = 0;
    for (long long id : *ids) {
      if (tuning.forget_workload(id)) ++forgotten;
      else missing.push_back(id);
    }
    std::cout << fmt::format("{} workload(s) removed from {}\n", forgotten, tuning.path().string());
    if (!missing.empty())
      throw Error(fmt::format("no workload {} in tuning database '{}'; `fact db list` shows the ids",
                              fmt::join(missing, ", "), tuning.path().string()));
  });

  auto file = std::make_shared<std::string>();
  auto* export_cmd = db->add_subcommand("export", "write every workload (candidates, baseline, winner) to a JSON file");
  export_cmd->add_option("FILE", *file, "the JSON file to write")->required();
  export_cmd->add_option("--db", *db_path, db_help);
  export_cmd->callback([db_path, file] {
    auto tuning = TuningDb::open(db_path->empty() ? default_tuning_db_path() : std::filesystem::path(*db_path));
    int n = export_tuning_db(tuning, *file);
    std::cout << fmt::format("{} workload(s) of {} written to {}\n", n, tuning.path().string(), *file);
  });

  auto replace = std::make_shared<bool>(false);
  auto* import_cmd = db->add_subcommand("import", "record the workloads of a `fact db export` file");
  import_cmd->add_option("FILE", *file, "a file `fact db export` wrote")->required()->check(CLI::ExistingFile);
  import_cmd->add_option("--db", *db_path, db_help);
  import_cmd->add_flag("--replace", *replace, "take the file's winner where this database has decided one too");
  import_cmd->callback([db_path, file, replace] {
    auto tuning = TuningDb::open(db_path->empty() ? default_tuning_db_path() : std::filesystem::path(*db_path));
    auto counts = import_tuning_db(tuning, *file, *replace);
    std::cout << fmt::format("{} workload(s) imported into {}; {} kept as they were (a winner decided here; "
                             "--replace takes the file's)\n", counts.imported, tuning.path().string(), counts.kept);
  });
});

}  // namespace
}  // namespace fact::cli

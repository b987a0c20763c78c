#pragma once
// Shipping a tuning database (`fact db export` / `fact db import`): its workloads as one JSON file (each as
// `fact db show --json` prints it), so a machine that measured them hands its winners to another (a device call's
// database back to this checkout, a team's results to a user) and their kernels are built, not tuned again.
#include <filesystem>

#include "realize/tuning_db.h"

namespace fact {

inline constexpr const char* kTuningExportFormat = "fact-tuning-db-export";

// Writes every workload of `db` (key, device, baseline, candidates, winner); returns how many.
int export_tuning_db(TuningDb& db, const std::filesystem::path& file);

struct ImportCounts {
  int imported = 0;  // recorded (new workloads, or replaced)
  int kept = 0;      // this database had decided a winner already and replace was off: left as it was
};

// Records the file's workloads into `db`: key, device, baseline and candidates, then the file's winner. A workload
// this database has a winner for is left as it is unless `replace`. Throws Error naming the file and the entry
// when it is not an export or an entry is malformed; nothing of that entry is written.
ImportCounts import_tuning_db(TuningDb& db, const std::filesystem::path& file, bool replace);

}  // namespace fact

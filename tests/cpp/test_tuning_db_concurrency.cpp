// Several `fact bench` workers tune into one database at once: two processes write at the same time and
// every record of both survives (WAL plus a busy timeout, BEGIN IMMEDIATE for writes).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "realize/tuning_db.h"

namespace fs = std::filesystem;
using fact::TuningDb;

namespace {

fact::WorkloadKey key(int m) {
  fact::WorkloadKey k;
  k.pattern = "gemm";
  k.shape = {{"m", m}, {"n", 512}, {"k", 256}, {"batch", 1}};
  k.dtype = "f32";
  k.layout = "rrr";
  k.numerics = "tf32";
  k.arch = "sm_90a";
  return k;
}

// One writer process: waits for the start signal, then records `count` workloads with two candidates and a winner.
int writer(const fs::path& db_path, const fs::path& go, int first_m, int count) {
  while (!fs::exists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    auto db = TuningDb::open(db_path);
    for (int i = 0; i < count; ++i) {
      long long id = db.upsert_workload(key(first_m + i), "test");
      fact::CandidateRecord a, b;
      a.config_id = "cfg_a";
      a.status = "ok";
      a.time_ms = 1.0 + i;
      b.config_id = "cfg_b";
      b.status = "ok";
      b.time_ms = 0.5 + i;
      db.record_candidates(id, {a, b});
      db.record_baseline(id, {"torch.matmul", 2.0 + i, 1e-6, 1e-5});
      db.set_winner(id, "cfg_b");
    }
  } catch (const std::exception& e) {
    std::ofstream(db_path.string() + ".err." + std::to_string(getpid())) << e.what();
    return 1;
  }
  return 0;
}

}  // namespace

TEST(TuningDbConcurrency, TwoProcessesWritingAtOnceLoseNothing) {
  fs::path dir = fs::temp_directory_path() / ("fact_test_tuning_db_conc_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path db_path = dir / "tuning.sqlite", go = dir / "go";
  const int per_writer = 60;
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(writer(db_path, go, 1000 * (w + 1), per_writer));  // no SQLite handle crosses the fork
    children.push_back(pid);
  }
  std::ofstream(go) << "go";  // both start together, so their transactions interleave
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed; see " << dir;
  }
  auto db = TuningDb::open(db_path);
  auto all = db.list_workloads();
  ASSERT_EQ(all.size(), 2u * per_writer);
  std::set<int> ms;
  for (const auto& w : all) {
    ms.insert(w.key.shape.at("m").get<int>());
    EXPECT_EQ(w.candidates, 2);
    EXPECT_EQ(w.winner, "cfg_b");
  }
  EXPECT_EQ(ms.size(), 2u * per_writer);
  EXPECT_TRUE(ms.count(1000) && ms.count(2000 + per_writer - 1));
  fs::remove_all(dir);
}

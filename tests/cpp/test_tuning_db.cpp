#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "realize/tuning_db.h"
#include "realize/tuning_db_exchange.h"

namespace fs = std::filesystem;
using fact::CandidateRecord;
using fact::TuningDb;
using fact::WorkloadKey;

namespace {

// A fresh folder per test, so tests never see each other's databases.
fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("fact_test_tuning_db_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

WorkloadKey gemm_key(int m = 4096) {
  WorkloadKey k;
  k.pattern = "gemm_bias_relu";
  k.shape = {{"m", m}, {"n", 1024}, {"k", 512}, {"batch", 1}};
  k.dtype = "f16";
  k.layout = "rcr";
  k.numerics = "f32_accumulate";
  k.arch = "sm_90a";
  k.cutlass_version = "4.2.0";
  k.nvcc_version = "13.0";
  return k;
}

CandidateRecord candidate(const std::string& id, const std::string& status, std::optional<double> ms,
                          const std::string& message = "") {
  CandidateRecord c;
  c.config_id = id;
  c.config = {{"threadblock_shape", {128, 128, 64}}, {"stages", 4}, {"id", id}};
  c.status = status;
  c.time_ms = ms;
  if (ms) {
    c.rel_err = 1e-3;
    c.max_abs_err = 2e-2;
  }
  c.message = message;
  return c;
}

void exec_sql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// Opens `path` expecting an Error whose message contains every one of `needles`.
void expect_open_error(const fs::path& path, const std::vector<std::string>& needles) {
  try {
    TuningDb::open(path);
    FAIL() << "expected an error opening " << path;
  } catch (const fact::Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(TuningDb, RoundTripSurvivesReopen) {
  fs::path path = fresh_dir("roundtrip") / "tuning.sqlite";
  long long id = 0;
  {
    auto db = TuningDb::open(path);
    id = db.upsert_workload(gemm_key(), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(db.upsert_workload(gemm_key(), "NVIDIA H100 80GB HBM3"), id) << "same key, same workload";
    EXPECT_NE(db.upsert_workload(gemm_key(2048), "NVIDIA H100 80GB HBM3"), id);
    db.record_candidates(id, {candidate("cfg_slow", "ok", 0.50), candidate("cfg_fast", "ok", 0.25),
                              candidate("cfg_bad", "failed", std::nullopt, "kernel.cu(3): error: no\nmore"),
                              candidate("cfg_wrong", "verify_failed", 0.1, "rel_err 0.5 > 0.01")});
    db.record_baseline(id, {"torch.matmul (cuBLAS)", 0.40, 0.0, 0.0});
    db.set_winner(id, "cfg_fast");
    // Re-recording a candidate replaces it rather than adding a second row.
    db.record_candidates(id, {candidate("cfg_slow", "ok", 0.45)});
  }
  auto db = TuningDb::open(path);
  auto detail = db.show_workload(id);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->summary.key.canonical(), gemm_key().canonical());
  EXPECT_EQ(detail->summary.device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(detail->summary.winner, "cfg_fast");
  EXPECT_EQ(detail->summary.candidates, 4);
  EXPECT_EQ(detail->summary.ok_candidates, 2);
  ASSERT_TRUE(detail->summary.best_ms && detail->summary.speedup());
  EXPECT_DOUBLE_EQ(*detail->summary.best_ms, 0.25);
  EXPECT_DOUBLE_EQ(*detail->summary.speedup(), 0.40 / 0.25);
  EXPECT_EQ(detail->baseline.name, "torch.matmul (cuBLAS)");
  ASSERT_EQ(detail->candidates.size(), 4u);
  // "ok" candidates first, fastest first; the rest by config id.
  EXPECT_EQ(detail->candidates[0].config_id, "cfg_fast");
  EXPECT_EQ(detail->candidates[1].config_id, "cfg_slow");
  EXPECT_DOUBLE_EQ(*detail->candidates[1].time_ms, 0.45);
  EXPECT_EQ(detail->candidates[2].config_id, "cfg_bad");
  EXPECT_FALSE(detail->candidates[2].time_ms);
  EXPECT_EQ(detail->candidates[2].message, "kernel.cu(3): error: no\nmore");
  EXPECT_EQ(detail->candidates[0].config["stages"], 4);
  EXPECT_FALSE(detail->candidates[0].updated_at.empty());

  auto json = fact::to_json(*detail);
  EXPECT_EQ(json["winner"], "cfg_fast");
  EXPECT_EQ(json["candidates"].size(), 4u);
  EXPECT_TRUE(json["candidates"][2]["time_ms"].is_null());
  EXPECT_EQ(json["key"]["shape"]["m"], 4096);

  auto all = db.list_workloads();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, id);
  EXPECT_TRUE(all[1].winner.empty());
  EXPECT_FALSE(all[1].best_ms);
  EXPECT_FALSE(db.show_workload(id + 100));

  // Forgotten: the workload, its candidates and its winner, so the next tune measures it again; the other stays.
  EXPECT_TRUE(db.forget_workload(id));
  EXPECT_FALSE(db.show_workload(id));
  EXPECT_FALSE(db.get_winner(gemm_key()));
  EXPECT_EQ(db.list_workloads().size(), 1u);
  EXPECT_FALSE(db.forget_workload(id)) << "already gone";
  long long again = db.upsert_workload(gemm_key(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(db.show_workload(again)->candidates.size(), 0u) << "no candidate of the forgotten workload comes back";
}

TEST(TuningDb, WinnerIsReusedByAnEquivalentKeyAndLookupIsFast) {
  fs::path path = fresh_dir("winner") / "tuning.sqlite";
  {
    auto db = TuningDb::open(path);
    for (int m = 1; m <= 300; ++m) {
      long long id = db.upsert_workload(gemm_key(m * 16), "H100");
      db.record_candidates(id, {candidate("cfg_a", "ok", 1.0 / m), candidate("cfg_b", "failed", std::nullopt)});
      db.record_baseline(id, {"torch", 2.0 / m, 0, 0});
      db.set_winner(id, m % 2 ? "cfg_a" : fact::kBaselineWinner);
    }
    long long id = *db.find_workload(gemm_key(16));
    EXPECT_THROW(db.set_winner(id, "cfg_unknown"), fact::Error);
    EXPECT_THROW(db.set_winner(id, "cfg_b"), fact::Error) << "a failed candidate must not win";
    EXPECT_THROW(db.set_winner(id + 1000, "cfg_a"), fact::Error);
  }

  // A warm tune: open the file and look the winner up, written the way a different caller might.
  auto start = std::chrono::steady_clock::now();
  auto db = TuningDb::open(path);
  WorkloadKey key = gemm_key(16 * 299);
  key.shape = {{"batch", 1.0}, {"k", 512}, {"n", 1024.0}, {"m", 16 * 299}};
  key.dtype = " F16";
  auto winner = db.get_winner(key);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(winner);
  EXPECT_EQ(winner->config_id, "cfg_a");
  EXPECT_EQ(winner->config["id"], "cfg_a");
  EXPECT_DOUBLE_EQ(*winner->time_ms, 1.0 / 299);
  EXPECT_LT(seconds, 1.0);

  auto baseline = db.get_winner(gemm_key(16 * 300));
  ASSERT_TRUE(baseline);
  EXPECT_EQ(baseline->config_id, fact::kBaselineWinner);
  EXPECT_TRUE(baseline->config.is_null());
  EXPECT_DOUBLE_EQ(*baseline->time_ms, 2.0 / 300);

  EXPECT_FALSE(db.get_winner(gemm_key(7)));  // never tuned
  auto undecided = db.upsert_workload(gemm_key(9), "H100");
  EXPECT_FALSE(db.get_winner(gemm_key(9))) << "workload " << undecided << " has no winner yet";
}

TEST(TuningDb, KeyCanonicalization) {
  WorkloadKey a = gemm_key();
  WorkloadKey b = gemm_key();
  b.shape = {{"n", 1024.0}, {"batch", 1}, {"m", 4096}, {"k", 512u}};
  b.dtype = "F16 ";
  b.arch = " SM_90A";
  b.pattern = "gemm_bias_relu\n";
  EXPECT_EQ(a.canonical(), b.canonical());
  EXPECT_NE(a.canonical().find("\"m\":4096"), std::string::npos) << a.canonical();

  auto differs = [&](auto change) {
    WorkloadKey c = gemm_key();
    change(c);
    return c.canonical() != a.canonical();
  };
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.shape["k"] = 513; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.shape["k"] = 512.5; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.arch = "sm_100a"; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.numerics = "f16_accumulate"; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.nvcc_version = "12.8"; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.cutlass_version = "4.1.0"; }));
  EXPECT_TRUE(differs([](WorkloadKey& k) { k.layout = "rrr"; }));

  auto db = TuningDb::open(fresh_dir("canonical") / "t.sqlite");
  EXPECT_EQ(db.upsert_workload(a, "H100"), db.upsert_workload(b, "H100"));
  EXPECT_EQ(db.list_workloads().size(), 1u);
}

TEST(TuningDb, RefusesAForeignSqliteDatabaseAndLeavesItAlone) {
  fs::path dir = fresh_dir("foreign");
  fs::path other = dir / "other.sqlite";
  exec_sql(other, "CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');");
  expect_open_error(other, {other.string(), "another application", "users", "--db"});

  fs::path marked = dir / "marked.sqlite";
  exec_sql(marked, "PRAGMA application_id = 1234;");
  expect_open_error(marked, {marked.string(), "another application"});

  // Untouched: still its own tables and no FACT schema.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'workloads'", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(TuningDb, CorruptOrNonSqliteFileIsAClearError) {
  fs::path dir = fresh_dir("corrupt");
  fs::path text = dir / "notes.sqlite";
  std::ofstream(text) << "this is a text file, not a database\n";
  expect_open_error(text, {text.string(), "not a FACT tuning database", "Move it aside"});

  // A real FACT database whose pages were overwritten.
  fs::path damaged = dir / "damaged.sqlite";
  {
    auto db = TuningDb::open(damaged);
    db.upsert_workload(gemm_key(), "H100");
  }
  fs::remove(dir / "damaged.sqlite-wal");
  fs::remove(dir / "damaged.sqlite-shm");
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);  // the page size and format bytes of the header
    std::string junk(200, '\xff');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  expect_open_error(damaged, {damaged.string(), "not a FACT tuning database"});
}

TEST(TuningDb, CreatesMissingFoldersAndNamesUnusablePaths) {
  fs::path dir = fresh_dir("folders");
  fs::path nested = dir / "a" / "b" / "c" / "tuning.sqlite";
  {
    auto db = TuningDb::open(nested);
    db.upsert_workload(gemm_key(), "H100");
  }
  EXPECT_TRUE(fs::exists(nested));
  EXPECT_EQ(TuningDb::open(nested).list_workloads().size(), 1u);

  fs::path blocker = dir / "plain_file";
  std::ofstream(blocker) << "x";
  expect_open_error(blocker / "tuning.sqlite", {(blocker).string(), "FACT_TUNING_DB"});
  expect_open_error(dir, {dir.string(), "is a folder"});
}

TEST(TuningDb, NewerSchemaIsRefused) {
  fs::path path = fresh_dir("newer") / "t.sqlite";
  { TuningDb::open(path); }
  exec_sql(path, "UPDATE fact_schema SET version = 99;");
  expect_open_error(path, {path.string(), "newer", "99"});
}

TEST(TuningDb, TwoHandlesShareOneFile) {
  fs::path path = fresh_dir("shared") / "t.sqlite";
  auto first = TuningDb::open(path);
  auto second = TuningDb::open(path);
  long long id = first.upsert_workload(gemm_key(), "H100");
  second.record_candidates(id, {candidate("cfg_a", "ok", 0.3)});
  first.set_winner(id, "cfg_a");
  auto winner = second.get_winner(gemm_key());
  ASSERT_TRUE(winner);
  EXPECT_EQ(winner->config_id, "cfg_a");
}

TEST(TuningDb, DefaultPathFollowsTheEnvironment) {
  const char* old = std::getenv("FACT_TUNING_DB");
  std::string saved = old ? old : "";
  setenv("FACT_TUNING_DB", "/tmp/somewhere/x.sqlite", 1);
  EXPECT_EQ(fact::default_tuning_db_path(), fs::path("/tmp/somewhere/x.sqlite"));
  unsetenv("FACT_TUNING_DB");
  EXPECT_EQ(fact::default_tuning_db_path().filename(), "tuning.sqlite");
  EXPECT_EQ(fact::default_tuning_db_path().parent_path().filename(), "fact");
  if (old) setenv("FACT_TUNING_DB", saved.c_str(), 1);
}

TEST(TuningDb, ExportThenImportCarriesWinnersAndKeepsDecidedOnes) {
  fs::path dir = fresh_dir("exchange");
  {
    auto src = TuningDb::open(dir / "measured.sqlite");
    long long id = src.upsert_workload(gemm_key(), "NVIDIA H100 80GB HBM3");
    src.record_baseline(id, {"torch.matmul (cuBLAS)", 2.0, 1e-3, 1e-2});
    src.record_candidates(id, {candidate("a", "ok", 1.5), candidate("b", "ok", 1.2), candidate("c", "failed", {}, "ptxas")});
    src.set_winner(id, "b");
    long long id2 = src.upsert_workload(gemm_key(256), "NVIDIA H100 80GB HBM3");
    src.record_candidates(id2, {candidate("a", "ok", 3.0)});
    src.set_winner(id2, fact::kBaselineWinner);
    EXPECT_EQ(fact::export_tuning_db(src, dir / "winners.json"), 2);
  }
  auto dst = TuningDb::open(dir / "here.sqlite");
  long long mine = dst.upsert_workload(gemm_key(256), "NVIDIA H200");
  dst.record_candidates(mine, {candidate("z", "ok", 0.5)});
  dst.set_winner(mine, "z");

  auto counts = fact::import_tuning_db(dst, dir / "winners.json", false);
  EXPECT_EQ(counts.imported, 1);
  EXPECT_EQ(counts.kept, 1) << "a winner decided here stays without --replace";
  auto w = dst.get_winner(gemm_key());
  ASSERT_TRUE(w);
  EXPECT_EQ(w->config_id, "b");
  EXPECT_EQ(w->device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(w->config["id"], "b");
  EXPECT_DOUBLE_EQ(*w->time_ms, 1.2);
  EXPECT_DOUBLE_EQ(*w->baseline_ms, 2.0);
  EXPECT_EQ(dst.show_workload(w->workload_id)->candidates.size(), 3u);
  EXPECT_EQ(dst.get_winner(gemm_key(256))->config_id, "z");

  counts = fact::import_tuning_db(dst, dir / "winners.json", true);
  EXPECT_EQ(counts.imported, 2);
  EXPECT_EQ(dst.get_winner(gemm_key(256))->config_id, fact::kBaselineWinner);

  std::ofstream(dir / "bad.json") << R"({"format": "fact-tuning-db-export", "version": 1, "workloads": [
    {"key": {"pattern": "p"}, "candidates": []}]})";
  try {
    fact::import_tuning_db(dst, dir / "bad.json", false);
    FAIL() << "a malformed entry must be an error";
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: workload 0: malformed"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "other.json") << R"({"format": "something-else"})";
  EXPECT_THROW(fact::import_tuning_db(dst, dir / "other.json", false), fact::Error);
}

// The shared tuning pipeline without a GPU: fake builds (cp) and a stand-in for the Python runner that
// answers with chosen times and errors, so the winning rule, the accuracy hook, the warm path and every
// early exit are checked against hand-picked numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "realize/candidate_tuner.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace fact;
using namespace fact::realize;

namespace {

class CandidateTuner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("fact_test_candidate_tuner_" + std::to_string(getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (const char* v = std::getenv("FACT_KERNEL_CACHE")) saved_cache = v;
    setenv("FACT_KERNEL_CACHE", (dir / "kernels").c_str(), 1);
    db.emplace(TuningDb::open(dir / "tuning.sqlite"));
    options.work_dir = dir / "work";
    options.measure_runner = [this](const fs::path& request, const fs::path& result) {
      ++runner_calls;
      last_request = read_json_file(request, "request");
      ProcessResult pr;
      pr.exit_code = runner_exit;
      if (runner_exit == 0) write_file_atomic(result, answer.dump());
      return pr;
    };
  }
  void TearDown() override {
    db.reset();
    fs::remove_all(dir);
    if (saved_cache) setenv("FACT_KERNEL_CACHE", saved_cache->c_str(), 1);
    else unsetenv("FACT_KERNEL_CACHE");
  }

  // Candidates a, b, c; `failing` ones get a compiler that fails.
  TuneSubject subject(const std::string& pattern, std::vector<std::string> failing = {}) {
    TuneSubject s;
    s.key.pattern = pattern;
    s.key.shape = {{"rows", 4096}};
    s.key.dtype = "f32";
    s.key.numerics = "fp32";
    s.key.arch = "sm_90a";
    auto job = [pattern, failing](const std::string& id) {
      BuildJob j;
      j.id = id;
      j.source = "// kernel " + pattern + " " + id + "\n";
      bool fail = std::find(failing.begin(), failing.end(), id) != failing.end();
      j.command = fail ? std::vector<std::string>{"sh", "-c", "echo 'error: no' >&2; exit 2"}
                       : std::vector<std::string>{"cp", "{source}", "{output}"};
      return j;
    };
    s.candidates = [job](int top_n, std::string& line) {
      std::vector<TuneCandidate> out;
      for (std::string id : {"a", "b", "c"}) {
        if (static_cast<int>(out.size()) == top_n) break;
        TuneCandidate c;
        c.config_id = id;
        c.config = {{"tile", id}};
        c.job = job(id);
        out.push_back(c);
      }
      line = "3 configs";
      return out;
    };
    s.rebuild = [job](const json& config) {
      TuneCandidate c;
      c.job = job(config.at("tile").get<std::string>());
      return c;
    };
    s.measure_request = [](const BuiltLibraries& libs) {
      json ids = json::array();
      for (auto& b : libs) ids.push_back(b.config_id);
      return json{{"candidates", ids}};
    };
    return s;
  }

  static json candidate(const std::string& id, const std::string& status, double ms, double rel_err = 1e-7) {
    return {{"id", id}, {"status", status}, {"ms", ms}, {"rel_err", rel_err}, {"message", nullptr}};
  }

  fs::path dir;
  std::optional<std::string> saved_cache;
  std::optional<TuningDb> db;
  TuneOptions options;
  json answer, last_request;
  int runner_exit = 0, runner_calls = 0;
};

}  // namespace

TEST_F(CandidateTuner, FastestVerifiedCandidateWinsAndIsReusedWithoutMeasuring) {
  answer = {{"device", "NVIDIA H100"},
            {"baseline", {{"name", "torch.layer_norm"}, {"ms", 1.0}, {"rel_err", 2e-7}}},
            {"candidates", {candidate("a", "ok", 0.80), candidate("b", "ok", 0.60), candidate("c", "verify_failed", 0.1)}}};
  auto s = subject("norm");
  auto out = tune_candidates(s, *db, options);
  EXPECT_EQ(out.status, "tuned");
  EXPECT_EQ(out.winner, "b") << "c was faster but did not verify";
  EXPECT_EQ(out.verified, 2);
  EXPECT_EQ(out.built, 3);
  EXPECT_DOUBLE_EQ(*out.fact_ms, 0.60);
  EXPECT_DOUBLE_EQ(*out.speedup(), 1.0 / 0.60);
  EXPECT_EQ(out.baseline_name, "torch.layer_norm");
  EXPECT_TRUE(fs::exists(out.library));
  EXPECT_EQ(last_request["candidates"].size(), 3u);

  auto again = tune_candidates(s, *db, options);
  EXPECT_EQ(again.status, "cached");
  EXPECT_EQ(again.winner, "b");
  EXPECT_EQ(again.winner_config, (json{{"tile", "b"}}));
  EXPECT_TRUE(fs::exists(again.library));
  EXPECT_EQ(runner_calls, 1) << "a recorded winner is not measured again";

  options.device = "NVIDIA H100";
  EXPECT_EQ(tune_candidates(s, *db, options).status, "cached") << "same GPU";
  options.device = "NVIDIA H200";
  EXPECT_EQ(tune_candidates(s, *db, options).status, "tuned") << "a winner timed on another GPU is tuned again";
  EXPECT_EQ(runner_calls, 2);

  options.device = "";
  options.force = true;
  tune_candidates(s, *db, options);
  EXPECT_EQ(runner_calls, 3);
}

TEST_F(CandidateTuner, TimedVariantsOfTheBestCandidateAreReportedButDecideNothing) {
  json a = candidate("a", "ok", 0.80), b = candidate("b", "ok", 0.60);
  a["variants"] = {{{"problem", {{"channels_last", 7}}}, {"ms", 0.30}}};
  b["variants"] = {{{"problem", {{"channels_last", 7}}}, {"ms", 0.50}}};
  answer = {{"device", "NVIDIA H100"},
            {"baseline", {{"name", "torch conv"}, {"ms", 1.0}, {"rel_err", 2e-7},
                          {"variants", {{{"problem", {{"channels_last", 7}}}, {"name", "torch conv"}, {"ms", 0.4}}}}}},
            {"candidates", {a, b}}};
  auto out = tune_candidates(subject("conv"), *db, options);
  EXPECT_EQ(out.winner, "b") << "the tuned problem's time decides, not a variant's";
  ASSERT_EQ(out.variants.size(), 1u);
  EXPECT_DOUBLE_EQ(out.variants[0]["fact_ms"].get<double>(), 0.50) << "the best candidate's variant time";
  EXPECT_DOUBLE_EQ(out.variants[0]["baseline_ms"].get<double>(), 0.4);
  EXPECT_EQ(out.variants[0]["problem"]["channels_last"], 7);
  EXPECT_EQ(out.to_json()["variants"], out.variants);
}

TEST_F(CandidateTuner, PlannedBuildsAreTheCandidatesOfAColdTuneOrTheRecordedWinner) {
  auto s = subject("norm");
  auto ids = [](const PlannedBuilds& p) {
    std::vector<std::string> out;
    for (const auto& j : p.jobs) out.push_back(j.id);
    return out;
  };
  auto cold = planned_build_jobs(s, *db, options);
  EXPECT_FALSE(cold.recorded_winner);
  EXPECT_EQ(ids(cold), (std::vector<std::string>{"a", "b", "c"})) << "nothing recorded yet: the ranked candidates";
  options.cached_only = true;
  EXPECT_TRUE(planned_build_jobs(s, *db, options).jobs.empty()) << "over budget: nothing is tuned, nothing built";
  options.cached_only = false;

  answer = {{"device", "NVIDIA H100"},
            {"baseline", {{"name", "torch.layer_norm"}, {"ms", 1.0}, {"rel_err", 2e-7}}},
            {"candidates", {candidate("a", "ok", 0.80), candidate("b", "ok", 0.60), candidate("c", "ok", 0.9)}}};
  ASSERT_EQ(tune_candidates(s, *db, options).winner, "b");
  auto warm = planned_build_jobs(s, *db, options);
  EXPECT_TRUE(warm.recorded_winner);
  EXPECT_EQ(ids(warm), (std::vector<std::string>{"b"})) << "the winner the warm path rebuilds";
  options.device = "NVIDIA H200";
  EXPECT_EQ(ids(planned_build_jobs(s, *db, options)).size(), 3u) << "a winner timed on another GPU is tuned again";
  options.device = "";
  options.force = true;
  EXPECT_FALSE(planned_build_jobs(s, *db, options).recorded_winner) << "forced to tune again";

  options.force = false;
  answer["candidates"] = {candidate("a", "ok", 1.5), candidate("b", "ok", 1.4), candidate("c", "ok", 1.6)};
  ASSERT_EQ(tune_candidates(subject("slow"), *db, options).winner, kBaselineWinner);
  auto kept = planned_build_jobs(subject("slow"), *db, options);
  EXPECT_TRUE(kept.recorded_winner && kept.jobs.empty()) << "PyTorch won: nothing to build";
}

TEST_F(CandidateTuner, AWinNeedsMoreThanTheMarginOtherwisePyTorchIsKept) {
  answer = {{"baseline", {{"name", "torch.matmul"}, {"ms", 1.0}}},
            {"candidates", {candidate("a", "ok", 0.98), candidate("b", "ok", 0.99), candidate("c", "ok", 1.5)}}};
  auto out = tune_candidates(subject("gemm_close"), *db, options);
  EXPECT_EQ(out.status, "baseline_kept");
  EXPECT_EQ(out.winner, kBaselineWinner);
  EXPECT_DOUBLE_EQ(*out.fact_ms, 0.98) << "the losing kernel's time is still reported";
  EXPECT_DOUBLE_EQ(*out.speedup(), 1.0);
  EXPECT_NE(out.message.find("best FACT kernel a took 0.9800 ms, torch.matmul 1.0000 ms"), std::string::npos) << out.message;
  EXPECT_TRUE(out.library.empty());
  EXPECT_EQ(db->get_winner(out.key)->config_id, kBaselineWinner);
  auto again = tune_candidates(subject("gemm_close"), *db, options);
  EXPECT_EQ(again.status, "cached");
  EXPECT_DOUBLE_EQ(*again.fact_ms, 0.98) << "a cached PyTorch winner reports the kernel it beat, not its own time";
  EXPECT_DOUBLE_EQ(*again.baseline_ms, 1.0);
  EXPECT_EQ(again.baseline_name, "torch.matmul");

  answer["candidates"] = {candidate("a", "ok", 0.969)};
  options.force = true;
  EXPECT_EQ(tune_candidates(subject("gemm_close"), *db, options).status, "tuned") << "3.1% faster is a win";
}

TEST_F(CandidateTuner, AccuracyHookDemotesACandidateAndTheNextBestWins) {
  answer = {{"baseline", {{"ms", 1.0}, {"rel_err", 4e-7}}},
            {"fp32_reference_err", 5e-7},
            {"candidates", {candidate("a", "ok", 0.3, 2.3e-6), candidate("b", "ok", 0.5, 3e-7)}}};
  auto s = subject("gemm_3x");
  s.accuracy_shortfall = [](const CandidateRecord& rec, const TuneOutcome& so_far) -> std::string {
    return *rec.rel_err > 2 * *so_far.fp32_reference_err ? "not fp32-accurate" : "";
  };
  auto out = tune_candidates(s, *db, options);
  EXPECT_EQ(out.status, "tuned");
  EXPECT_EQ(out.winner, "b");
  EXPECT_EQ(out.verified, 1);
  EXPECT_DOUBLE_EQ(*out.fp32_reference_err, 5e-7);
  auto detail = db->show_workload(out.workload_id);
  ASSERT_TRUE(detail);
  bool seen = false;
  for (auto& c : detail->candidates)
    if (c.config_id == "a") {
      seen = true;
      EXPECT_EQ(c.status, "accuracy_failed");
      EXPECT_EQ(c.message, "not fp32-accurate");
    }
  EXPECT_TRUE(seen);
}

TEST_F(CandidateTuner, WithoutAGpuOrWithoutMeasuringCandidatesAreBuiltAndRecorded) {
  runner_exit = 3;
  auto out = tune_candidates(subject("no_gpu"), *db, options);
  EXPECT_EQ(out.status, "needs_gpu");
  EXPECT_EQ(out.built, 3);
  EXPECT_FALSE(db->get_winner(out.key)) << "nothing was decided";

  options.measure = false;
  auto built = tune_candidates(subject("build_only"), *db, options);
  EXPECT_EQ(built.status, "built");
  EXPECT_EQ(runner_calls, 1);
}

TEST_F(CandidateTuner, FailedBuildsAreRecordedAndNotMeasured) {
  answer = {{"baseline", {{"ms", 1.0}}}, {"candidates", {candidate("b", "ok", 0.5)}}};
  auto out = tune_candidates(subject("half_builds", {"a", "c"}), *db, options);
  EXPECT_EQ(out.built, 1);
  EXPECT_EQ(last_request["candidates"], json::array({"b"}));
  EXPECT_EQ(out.winner, "b");

  auto none = tune_candidates(subject("no_builds", {"a", "b", "c"}), *db, options);
  EXPECT_EQ(none.status, "no_candidate");
  EXPECT_NE(none.message.find("fact db show"), std::string::npos);
}

TEST_F(CandidateTuner, NoConfigAndABadRunnerAnswerAreClear) {
  auto s = subject("no_config");
  s.candidates = [](int, std::string&) -> std::vector<TuneCandidate> { throw Error("K=3 is not a multiple of 4"); };
  auto out = tune_candidates(s, *db, options);
  EXPECT_EQ(out.status, "no_candidate");
  EXPECT_EQ(out.message, "K=3 is not a multiple of 4");

  answer = {{"baseline", {{"ms", 1.0}}}, {"candidates", {candidate("zz", "ok", 0.5)}}};
  try {
    tune_candidates(subject("bad_answer"), *db, options);
    FAIL() << "an answer for a candidate never asked for must not pass";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'zz'"), std::string::npos) << e.what();
  }

  runner_exit = 1;
  EXPECT_THROW(tune_candidates(subject("runner_crash"), *db, options), Error);
}

TEST_F(CandidateTuner, PastTheTuningBudgetOnlyRecordedWinnersAreUsed) {
  answer = {{"device", "NVIDIA H100"},
            {"baseline", {{"name", "torch"}, {"ms", 1.0}, {"rel_err", 2e-7}}},
            {"candidates", {candidate("a", "ok", 0.5), candidate("b", "ok", 0.7), candidate("c", "ok", 0.9)}}};
  options.cached_only = true;
  auto out = tune_candidates(subject("norm"), *db, options);
  EXPECT_EQ(out.status, "over_budget");
  EXPECT_NE(out.message.find("tuning budget"), std::string::npos) << out.message;
  EXPECT_EQ(runner_calls, 0) << "nothing is built or measured past the budget";
  EXPECT_FALSE(db->get_winner(out.key)) << "and nothing is recorded";

  options.cached_only = false;
  EXPECT_EQ(tune_candidates(subject("norm"), *db, options).status, "tuned");
  options.cached_only = true;
  auto cached = tune_candidates(subject("norm"), *db, options);
  EXPECT_EQ(cached.status, "cached") << "a recorded winner costs nothing and is still used";
  EXPECT_EQ(cached.winner, "a");
  EXPECT_EQ(runner_calls, 1);
}

// A cold tune at another batch (the shape differs only in a free field) measures the winner recorded at the
// neighbouring shape first, in place of the ranking's last pick; a shape that differs elsewhere, or a pattern whose
// PyTorch baseline won, seeds nothing.
TEST_F(CandidateTuner, WinnersAtNeighbouringShapesSeedAColdTune) {
  answer = {{"baseline", {{"name", "torch.matmul"}, {"ms", 1.0}}},
            {"candidates", {candidate("a", "ok", 0.80), candidate("b", "ok", 0.50), candidate("c", "ok", 0.70)}}};
  auto first = subject("gemm_batch");
  first.free_shape_fields = {"/rows"};
  EXPECT_EQ(tune_candidates(first, *db, options).winner, "b");

  std::vector<std::string> log;
  options.log = [&](const std::string& line) { log.push_back(line); };
  options.top_n = 1;
  auto other_batch = first;
  other_batch.key.shape = {{"rows", 8192}};
  answer["candidates"] = {candidate("b", "ok", 0.45)};
  auto out = tune_candidates(other_batch, *db, options);
  EXPECT_EQ(last_request["candidates"], json::array({"b"})) << "the ranking alone would have measured a";
  EXPECT_EQ(out.status, "tuned");
  EXPECT_EQ(out.winner, "b");
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.find("seeded with b, the winner at a neighbouring shape") != std::string::npos;
  }));

  options.top_n = 2;
  auto third = first;
  third.key.shape = {{"rows", 100}};
  tune_candidates(third, *db, options);
  EXPECT_EQ(last_request["candidates"], json::array({"b", "a"})) << "the seed first, then the ranking's best";

  auto wider = first;
  wider.key.shape = {{"rows", 8192}, {"cols", 64}};
  tune_candidates(wider, *db, options);
  EXPECT_EQ(last_request["candidates"], json::array({"a", "b"})) << "another fixed field: no neighbour";

  auto no_free = first;
  no_free.free_shape_fields.clear();
  no_free.key.shape = {{"rows", 300}};
  tune_candidates(no_free, *db, options);
  EXPECT_EQ(last_request["candidates"], json::array({"a", "b"})) << "a subject without free fields is not seeded";

  answer = {{"baseline", {{"name", "torch.matmul"}, {"ms", 0.1}}}, {"candidates", {candidate("a", "ok", 0.80)}}};
  auto slow = subject("gemm_slow");
  slow.free_shape_fields = {"/rows"};
  EXPECT_EQ(tune_candidates(slow, *db, options).winner, kBaselineWinner);
  slow.key.shape = {{"rows", 64}};
  answer["candidates"] = {candidate("a", "ok", 0.80), candidate("b", "ok", 0.9)};
  tune_candidates(slow, *db, options);
  EXPECT_EQ(last_request["candidates"], json::array({"a", "b"})) << "PyTorch's win seeds nothing";
}

// Run-time variants of one kernel (a GEMM's swizzles): one build, each measured under its own id with its own
// argument fields; top_n counts the kernel once, and the winner's library is the shared one.
TEST_F(CandidateTuner, RunTimeVariantsShareOneBuildAndAreMeasuredEach) {
  answer = {{"baseline", {{"name", "torch.matmul"}, {"ms", 1.0}}},
            {"candidates", {candidate("v1", "ok", 0.80), candidate("v4", "ok", 0.60), candidate("c", "ok", 0.70)}}};
  auto s = subject("gemm_variants");
  auto base = s.candidates;
  s.candidates = [base](int top_n, std::string& line) {
    std::vector<TuneCandidate> all = base(3, line);
    std::vector<TuneCandidate> out;
    for (auto [id, swizzle] : {std::pair{"v1", 1}, std::pair{"v4", 4}}) {
      TuneCandidate v = all.at(0);  // candidate a's job: one kernel, two variants
      v.config_id = v.job->id = id;  // as kernel_build_job names a job: by its candidate
      v.config = {{"tile", "a"}, {"swizzle", swizzle}};
      v.kernel_id = "a";
      v.arguments = {{"swizzle", swizzle}};
      out.push_back(v);
    }
    if (top_n > 1) out.push_back(all.at(2));
    return out;
  };
  std::vector<BuiltCandidate> seen;
  s.measure_request = [&seen](const BuiltLibraries& libs) {
    seen = libs;
    json ids = json::array();
    for (auto& b : libs) ids.push_back(b.config_id);
    return json{{"candidates", ids}};
  };
  std::vector<std::string> log;
  options.log = [&](const std::string& line) { log.push_back(line); };
  options.top_n = 2;
  auto out = tune_candidates(s, *db, options);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].library, seen[1].library) << "the variants' shared build";
  EXPECT_NE(seen[0].library, seen[2].library);
  EXPECT_EQ(seen[1].kernel_id, "a");
  EXPECT_EQ(seen[1].arguments, (json{{"swizzle", 4}}));
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.find("building 3 candidates (2 kernels)") != std::string::npos;
  }));
  EXPECT_EQ(out.winner, "v4");
  EXPECT_EQ(out.library, seen[1].library);
  EXPECT_EQ(out.built, 3);
}

TEST(TuningDbNeighbours, ClosestBatchFirstAndNestedFieldsFree) {
  namespace fs = std::filesystem;
  fs::path path = fs::temp_directory_path() / ("fact_test_neighbours_" + std::to_string(getpid()) + ".sqlite");
  fs::remove(path);
  {
    TuningDb db = TuningDb::open(path);
    auto key = [](int m) {
      WorkloadKey k;
      k.pattern = "linear";
      k.shape = {{"m", m}, {"n", 64}, {"a", {{"ld", 32}, {"batch_stride", m * 32}}}};
      k.dtype = "f32";
      k.numerics = "tf32";
      k.arch = "sm_90a";
      return k;
    };
    for (int m : {64, 4096, 512}) {
      long long id = db.upsert_workload(key(m), "GPU");
      CandidateRecord c;
      c.config_id = "cfg" + std::to_string(m);
      c.config = {{"m_tuned", m}};
      c.status = "ok";
      c.time_ms = 1.0;
      db.record_candidates(id, {c});
      db.set_winner(id, c.config_id);
    }
    auto near = db.neighbour_winners(key(1024), {"/m", "/a/batch_stride"});
    ASSERT_EQ(near.size(), 3u);
    EXPECT_EQ(near[0].config_id, "cfg512") << "closest m first (1024 / 512)";
    EXPECT_EQ(near[1].config_id, "cfg4096");
    EXPECT_EQ(near[2].config_id, "cfg64");
    EXPECT_EQ(near[0].config, (json{{"m_tuned", 512}}));
    EXPECT_EQ(db.neighbour_winners(key(1024), {"/m"}).size(), 0u) << "a's batch_stride differs too";
    EXPECT_EQ(db.neighbour_winners(key(512), {"/m", "/a/batch_stride"}).size(), 2u) << "not its own workload";
  }
  fs::remove(path);
}

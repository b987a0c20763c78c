#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/process.h"

namespace fs = std::filesystem;

TEST(Process, CapturesOutputAndExitCode) {
  auto r = fact::run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(Process, KillsOnTimeout) {
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(1);
  auto r = fact::run_process({"sleep", "30"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
}

TEST(Process, TimeoutAlsoStopsGrandchildren) {
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(1);
  auto start = std::chrono::steady_clock::now();
  // The grandchild holds the pipes open: without a group kill the read loop would wait 30 s for it.
  auto r = fact::run_process({"sh", "-c", "sleep 30 & sleep 30"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A child that leaves a process holding its pipes (Inductor's compile workers did, for minutes) is done when it
// exits: its output is kept, the leftover is stopped, and the caller is not held up.
TEST(Process, ReturnsWhenTheChildExitsThoughALeftoverHoldsItsPipes) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = fact::run_process({"sh", "-c", "sleep 60 & echo done"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "done\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Process, MissingProgramIsAnError) {
  EXPECT_THROW(fact::run_process({"/nonexistent/program"}), fact::Error);
}

TEST(Files, AtomicWriteAndJsonErrorsNameTheFile) {
  fs::path dir = fs::temp_directory_path() / "fact_test_files";
  fs::create_directories(dir);
  fact::write_file_atomic(dir / "a.json", "{\"x\": 1}");
  EXPECT_EQ(fact::read_json_file(dir / "a.json", "test file")["x"], 1);
  EXPECT_FALSE(fs::exists(dir / "a.json.tmp"));
  fact::write_file_atomic(dir / "bad.json", "{oops");
  try {
    fact::read_json_file(dir / "bad.json", "rule file");
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule file"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
  }
  EXPECT_THROW(fact::read_text_file(dir / "missing.json", "IR file"), fact::Error);
}

// A stage of `fact optimize` runs in the process: its output goes to its log (its table to the console too), an
// Error it throws fails the step with the message, and the pipeline goes on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/process_counts.h"
#include "pipeline/stage_step.h"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(StageStep, OutputGoesToTheLogAndTheTableToTheConsole) {
  fs::path log = fs::temp_directory_path() / ("fact_test_stage_step_ok_" + std::to_string(getpid()) + ".log");
  nlohmann::json steps = nlohmann::json::array();
  std::ostringstream console_out, console_err;
  bool ok = fact::pipeline::run_stage({2, "tune: build and time", log, true},
                                      [](std::ostream& out, std::ostream& progress) {
                                        progress << "progress line\n";
                                        out << "the table\n";
                                      },
                                      steps, console_out, console_err);
  EXPECT_TRUE(ok);
  EXPECT_EQ(read(log), "progress line\nthe table\n");
  EXPECT_EQ(console_out.str(), "the table\n");
  EXPECT_EQ(console_err.str(), "[2/5] tune: build and time\n");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["ok"], true);
  EXPECT_EQ(steps[0]["log"], log.string());
  EXPECT_GE(steps[0]["seconds"].get<double>(), 0.0);
  EXPECT_GT(fact::process_counts().step_seconds.count("tune"), 0u);  // named by the title up to its colon
  fs::remove(log);
}

TEST(StageStep, AnErrorFailsTheStepWithItsMessageAndDoesNotEscape) {
  fs::path log = fs::temp_directory_path() / ("fact_test_stage_step_err_" + std::to_string(getpid()) + ".log");
  nlohmann::json steps = nlohmann::json::array();
  std::ostringstream console_out, console_err;
  bool ok = fact::pipeline::run_stage({3, "ops build: the winners", log, false},
                                      [](std::ostream& out, std::ostream&) {
                                        out << "written so far\n";
                                        throw fact::Error("the op library did not build: nvcc missing");
                                      },
                                      steps, console_out, console_err);
  EXPECT_FALSE(ok);
  EXPECT_EQ(steps[0]["ok"], false);
  EXPECT_EQ(console_out.str(), "");  // not echoed
  EXPECT_NE(read(log).find("written so far\nerror: the op library did not build: nvcc missing"), std::string::npos);
  EXPECT_NE(console_err.str().find("failed; see " + log.string()), std::string::npos);
  EXPECT_NE(console_err.str().find("nvcc missing"), std::string::npos);
  fs::remove(log);
}

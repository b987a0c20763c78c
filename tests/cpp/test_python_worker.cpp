// The client of the long-lived Python worker, against a stand-in worker (data/fake_python_worker.py): requests share
// one process; a worker that dies fails only the request that killed it (named in the message) and is restarted
// once, after which requests run one-shot; time-outs, restarts asked for by the worker and Python children count.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <thread>

#include "core/paths.h"
#include "core/process_counts.h"
#include "core/python_worker.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string kFake = std::string(FACT_TEST_DATA) + "/fake_python_worker.py";

fact::PythonWorkerOptions fake_options() {
  fact::PythonWorkerOptions o;
  o.argv = {fact::python_exe(), kFake};
  o.one_shot_argv = {fact::python_exe(), kFake, "--one-shot"};
  o.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  return o;
}

bool have_python() { return fs::exists(fact::python_exe()); }

}  // namespace

TEST(PythonWorker, RequestsShareOneWorkerAndReturnTheModulesOutput) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  int before = fact::process_counts().python_starts_by_use["fact.worker"];
  fact::PythonWorker worker(fake_options());
  auto a = worker.run_module("echo", {"a", "b"});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out, "a b\n");
  EXPECT_EQ(a.err, "a note\n");
  EXPECT_EQ(worker.run_module("exit3", {}).exit_code, 3);
  auto unknown = worker.run_module("nope", {});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown module nope"), std::string::npos);
  EXPECT_EQ(worker.starts(), 1);
  EXPECT_EQ(fact::process_counts().python_starts_by_use["fact.worker"], before + 1);
}

TEST(PythonWorker, ADeathFailsTheRequestThatKilledItThenOneRestartThenOneShotRuns) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  fact::PythonWorker worker(fake_options());
  auto crashed = worker.run_module("crash", {"composed/"});
  EXPECT_EQ(crashed.exit_code, -1);
  EXPECT_EQ(crashed.signal, SIGSEGV);
  EXPECT_NE(crashed.err.find("about to crash"), std::string::npos);  // what the request printed before it died
  EXPECT_NE(crashed.err.find("died during request 1 (python -m crash composed/)"), std::string::npos) << crashed.err;
  EXPECT_NE(crashed.err.find("last words of the worker"), std::string::npos);
  EXPECT_NE(crashed.err.find("the next request starts a fresh worker"), std::string::npos);

  EXPECT_EQ(worker.run_module("echo", {"again"}).out, "again\n");  // a fresh worker
  EXPECT_EQ(worker.starts(), 2);
  EXPECT_NE(worker.run_module("crash", {}).err.find("further requests each start a Python of their own"),
            std::string::npos);
  auto one_shot = worker.run_module("echo", {"x"});
  EXPECT_EQ(one_shot.exit_code, 0);
  EXPECT_EQ(one_shot.out, "one-shot echo x\n");
  EXPECT_EQ(worker.starts(), 2);
  EXPECT_EQ(worker.deaths().size(), 2u);
}

TEST(PythonWorker, ATimeOutStopsTheWorkerAndTheNextRequestGetsAFreshOne) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  fact::PythonWorker worker(fake_options());
  auto hung = worker.run_module("hang", {}, 1s);
  EXPECT_TRUE(hung.timed_out);
  EXPECT_NE(hung.err.find("stopped after 1 s"), std::string::npos) << hung.err;
  EXPECT_EQ(worker.run_module("echo", {"ok"}).out, "ok\n");
  EXPECT_EQ(worker.starts(), 2);
}

TEST(PythonWorker, ARestartTheWorkerAsksForIsNoDeathAndChildrenAreCounted) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  fact::PythonWorker worker(fake_options());
  int before = fact::process_counts().python_starts_by_use["fake.child"];
  EXPECT_EQ(worker.run_module("children", {}).exit_code, 0);
  EXPECT_EQ(fact::process_counts().python_starts_by_use["fake.child"], before + 2);
  EXPECT_EQ(worker.run_module("restart", {}).exit_code, 0);
  EXPECT_EQ(worker.run_module("echo", {"fresh"}).out, "fresh\n");
  EXPECT_EQ(worker.starts(), 2);
  EXPECT_TRUE(worker.deaths().empty());
}

TEST(PythonWorker, AWorkerThatEndedBetweenRequestsIsADeathAndTheNextRequestStillRuns) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  fact::PythonWorker worker(fake_options());
  EXPECT_EQ(worker.run_module("quit", {}).exit_code, 0);
  std::this_thread::sleep_for(300ms);  // it exits after its answer
  EXPECT_EQ(worker.run_module("echo", {"still"}).out, "still\n");
  EXPECT_EQ(worker.starts(), 2);
  ASSERT_EQ(worker.deaths().size(), 1u);
  EXPECT_NE(worker.deaths()[0].find("ended between requests (exit code 0)"), std::string::npos) << worker.deaths()[0];
}

TEST(PythonWorker, AWorkerThatCannotStartIsReportedAndRequestsStillRun) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  auto o = fake_options();
  o.argv = {fact::python_exe(), "-c", "import sys; print('no protocol here', file=sys.stderr); sys.exit(5)"};
  fact::PythonWorker worker(o);
  auto r = worker.run_module("echo", {"y"});
  EXPECT_EQ(r.out, "one-shot echo y\n");  // after the start and its one retry failed
  ASSERT_EQ(worker.deaths().size(), 2u);
  EXPECT_NE(worker.deaths()[0].find("exit code 5"), std::string::npos) << worker.deaths()[0];
  EXPECT_NE(worker.deaths()[0].find("no protocol here"), std::string::npos);
}

TEST(PythonWorker, TheRealWorkerRunsAFactModule) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << fact::python_exe();
  fact::PythonWorker worker;  // python -m fact.worker
  auto r = worker.run_module("fact.environment", {"--cutlass"}, 120s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"cutlass_dir\""), std::string::npos) << r.out;
  auto refused = worker.run_module("os", {});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("is not one the worker runs"), std::string::npos);
}

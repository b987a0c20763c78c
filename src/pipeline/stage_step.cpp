#include "pipeline/stage_step.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <streambuf>

#include "core/error.h"
#include "core/process_counts.h"

namespace fact::pipeline {

namespace {

// Writes everything to the log file's buffer and, when given, to the console's too.
class TeeBuffer : public std::streambuf {
 public:
  TeeBuffer(std::streambuf* file, std::streambuf* console) : file_(file), console_(console) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    file_->sputc(static_cast<char>(c));
    if (console_) console_->sputc(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    file_->sputn(s, n);
    if (console_) console_->sputn(s, n);
    return n;
  }
  int sync() override {
    file_->pubsync();
    if (console_) console_->pubsync();
    return 0;
  }

 private:
  std::streambuf* file_;
  std::streambuf* console_;
};

// The step's name in process.step_seconds: its title up to the colon.
std::string step_key(const std::string& title) { return title.substr(0, title.find(':')); }

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool run_stage(const StageStep& step, const StageBody& body, nlohmann::json& steps, std::ostream& console_out,
               std::ostream& console_err) {
  console_err << fmt::format("[{}/5] {}\n", step.index, step.title) << std::flush;
  auto start = std::chrono::steady_clock::now();
  std::ofstream file(step.log, std::ios::trunc);
  if (!file) throw Error("cannot write the log " + step.log.string() + "; is the output folder writable?");
  TeeBuffer tee(file.rdbuf(), step.echo ? console_out.rdbuf() : nullptr);
  std::ostream out(&tee);
  std::string failure;
  try {
    body(out, file);
  } catch (const Error& e) {
    failure = e.what();
  } catch (const std::exception& e) {  // a bug, not bad input: the step fails, the pipeline goes on
    failure = std::string("internal error (please report it): ") + e.what();
  }
  out.flush();
  if (!failure.empty()) file << "error: " << failure << "\n";
  file.close();
  double seconds = seconds_since(start);
  note_step_seconds(step_key(step.title), seconds);
  steps.push_back({{"step", step.title}, {"ok", failure.empty()}, {"log", step.log.string()}, {"seconds", seconds}});
  if (!failure.empty())
    console_err << fmt::format("  failed; see {}\n  {}\n", step.log.string(), failure.substr(0, 1500)) << std::flush;
  return failure.empty();
}

}  // namespace fact::pipeline

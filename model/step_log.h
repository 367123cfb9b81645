// StepLog: the steps a worker served, one JSON line each (its shape, as the performance profile
// sees it, its wall time, and the time since the step before it ended), written by a worker
// started with `--step-log FILE` and read back by `pdserve profile calibrate`, which scales a
// measured profile to the steps as they ran while serving (model/profile_calibration.h). A line:
//   {"prompt_tokens":190,"prompt_attention":18145,"decode_tokens":0,"decode_context":0,
//    "max_context":190,"seconds":0.2112,"gap_seconds":0.0031}
// gap_seconds is absent on the first step a writer logs.
// The writer belongs to one thread (a worker's engine thread); lines are flushed as written, so a
// worker that is killed leaves every step before its last whole.
#pragma once

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/performance_profile.h"

namespace pdserve::model {

// One line of a step log.
struct LoggedStep {
  StepSample step;
  double gap_seconds = -1;  // from the end of the step logged before it to its start; -1: none
};

class StepLog {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens `path` to append to it (created when missing); says why when it cannot.
  static Result<std::unique_ptr<StepLog>> Open(const std::string& path);

  // The step that began at `start` and took step.seconds.
  void Write(const StepSample& step, Clock::time_point start);

 private:
  explicit StepLog(std::ofstream out) : out_(std::move(out)) {}
  std::ofstream out_;
  Clock::time_point last_end_{};  // of the step written last; the epoch before the first
};

// Every step in the file at `path`; InvalidArgument naming the file and line of the first line
// that is not a step (blank lines are skipped).
Result<std::vector<LoggedStep>> ReadStepLog(const std::string& path);

}  // namespace pdserve::model

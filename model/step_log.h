// StepLog: the steps a worker served, one JSON line each (its shape, as the performance profile
// sees it, and its wall time), written by a worker started with `--step-log FILE` and read back
// by `pdserve profile calibrate`, which scales a measured profile to the steps as they ran while
// serving (model/profile_calibration.h). A line:
//   {"prompt_tokens":190,"prompt_attention":18145,"decode_tokens":0,"decode_context":0,
//    "max_context":190,"seconds":0.2112}
// The writer belongs to one thread (a worker's engine thread); lines are flushed as written, so a
// worker that is killed leaves every step before its last whole.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/performance_profile.h"

namespace pdserve::model {

class StepLog {
 public:
  // Opens `path` to append to it (created when missing); says why when it cannot.
  static Result<std::unique_ptr<StepLog>> Open(const std::string& path);

  void Write(const StepSample& step);

 private:
  explicit StepLog(std::ofstream out) : out_(std::move(out)) {}
  std::ofstream out_;
};

// Every step in the file at `path`; InvalidArgument naming the file and line of the first line
// that is not a step (blank lines are skipped).
Result<std::vector<StepSample>> ReadStepLog(const std::string& path);

}  // namespace pdserve::model

// RunCommand: runs a program to completion for an actuator (sbatch, scancel, squeue, an
// operator's scale script) and returns what it printed. The program is exec'd directly with
// its argv (no shell), with this process's environment plus `extra_env`; stdout and stderr are
// collected apart, each capped at 64 KiB. It inherits no other descriptor of this process's.
// Past `timeout` the program is killed (SIGKILL).
//
// Threads: any; blocks the calling thread until the program ends, so actuators call it off the
// gateway's I/O threads.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::planner {

struct CommandOutput {
  int exit_status = 0;  // the program's exit status; 128 + N when killed by signal N
  std::string out, err;
};

// The program's output when it ran (whatever its exit status); Unavailable when it could not
// start, DeadlineExceeded when it ran past `timeout`.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                 const std::map<std::string, std::string>& extra_env = {});

// "`sbatch` exited with status 1: <the last line of stderr>": for an actuator's errors.
std::string DescribeFailure(const std::string& program, const CommandOutput& output);

}  // namespace pdserve::planner

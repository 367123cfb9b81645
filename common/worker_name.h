// WorkerName: the name a worker registers under, "HOST:PID", with "@slurm:JOB" appended when it
// runs in a Slurm job (SLURM_JOB_ID). The gateway shows it in logs and metrics, and its planner
// passes it to actuators, which find by it the process (local: the pid), the job (Slurm) or the
// pod (Kubernetes: a pod's hostname is its name) to let go first. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pdserve {

// "host:pid", or "host:pid@slurm:job" where `slurm_job` is not empty.
std::string WorkerName(std::string_view host, int64_t pid, std::string_view slurm_job);

struct WorkerNameParts {
  std::string host;
  int64_t pid = 0;
  std::string slurm_job;  // "" outside Slurm
};
// The parts of a name WorkerName made; nullopt for any other name (one given with a flag, a
// simulated worker's).
std::optional<WorkerNameParts> ParseWorkerName(std::string_view name);

}  // namespace pdserve

// Actuator: carries out the planner's count of burst workers for a pool on whatever runs the
// workers (docs/architecture.md, "The planner"): a Slurm cluster (planner/slurm_actuator.h),
// Kubernetes Deployments (planner/kubernetes_actuator.h), an operator's command
// (planner/command_actuator.h) or child processes of this one (planner/local_actuator.h, which
// `pdserve up --autoscale` uses). Reserved workers are the operator's: actuators touch only
// burst workers.
//
// Threads: SetBurstWorkers may block for as long as the orchestrator takes; one caller thread at
// a time (planner/actuation_loop.h), never a gateway I/O thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "planner/planner.h"

namespace pdserve::planner {

class Actuator {
 public:
  virtual ~Actuator() = default;
  // Makes `pool`'s burst workers `count`: asks for more, or lets the newest extra ones go; a
  // worker let go is sent SIGTERM, drains its requests, then exits. The same count again
  // changes nothing. The error says what the orchestrator refused.
  virtual Status SetBurstWorkers(Pool pool, int count) = 0;
  // `pool`'s burst workers in the order to let them go, as they registered
  // (common/worker_name.h: "host:pid", "host:pid@slurm:JOB"; a pod's host is its name), the
  // idlest first. A later SetBurstWorkers that lowers the count lets go first those of them it
  // can find (by pid, job or pod), then the newest. Kept until the next call; by default
  // ignored (the newest go).
  virtual void SetDrainOrder(Pool /*pool*/, std::vector<std::string> /*names*/) {}
  // For logs: "slurm (deploy/slurm/pdserve-worker.sbatch)".
  virtual std::string Describe() const = 0;
};

}  // namespace pdserve::planner

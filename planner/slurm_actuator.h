// SlurmActuator: burst workers as Slurm jobs, one worker a job, for clusters rented with Slurm.
// More workers: `sbatch --parsable --job-name=PREFIX-POOL-burst [sbatch args] --export=ALL,
// PDSERVE_POOL=POOL,PDSERVE_CLASS=burst,... SCRIPT POOL burst`; the job script
// (deploy/slurm/pdserve-worker.sbatch) runs `pdserve POOL --capacity-class burst ...`. Fewer:
// pending jobs go first, then the running jobs of the drain order (SetDrainOrder: workers register
// as "host:pid@slurm:JOB", common/worker_name.h), then the newest; a pending one is cancelled,
// a running one is sent SIGTERM (`scancel
// --full --signal=TERM`): its worker drains, exits, and the job ends. Before each change it asks
// `squeue` which of the pool's jobs still live, so a job that ended on its own is replaced, and
// jobs a previous gateway submitted under the same name are counted (and cancelled first).
//
// Threads: one caller at a time (planner/actuator.h).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "planner/actuator.h"

namespace pdserve::planner {

struct SlurmActuatorOptions {
  std::string job_script;                   // the batch script sbatch submits
  std::vector<std::string> sbatch_args;     // e.g. {"--partition=gpu", "--gres=gpu:1"}
  std::map<std::string, std::string> env;   // exported to the job, e.g. PDSERVE_GATEWAY
  std::string job_name_prefix = "pdserve";  // jobs are PREFIX-POOL-burst
  std::string sbatch = "sbatch", scancel = "scancel", squeue = "squeue";  // the programs
  std::chrono::milliseconds command_timeout{std::chrono::seconds(60)};
};

class SlurmActuator : public Actuator {
 public:
  explicit SlurmActuator(SlurmActuatorOptions options) : options_(std::move(options)) {}
  Status SetBurstWorkers(Pool pool, int count) override;
  void SetDrainOrder(Pool pool, std::vector<std::string> names) override;
  std::string Describe() const override { return "slurm (" + options_.job_script + ")"; }

 private:
  std::string JobName(Pool pool) const;  // PREFIX-POOL-burst
  struct Job {
    std::string id;
    bool pending = false;
  };
  // The pool's live jobs, oldest first, not counting those this actuator already let go.
  Result<std::vector<Job>> LiveJobs(Pool pool);
  Result<std::string> Submit(Pool pool);
  Status Release(const Job& job);

  SlurmActuatorOptions options_;
  std::set<std::string> released_;  // job ids sent SIGTERM or cancelled, maybe still draining
  std::map<Pool, std::vector<std::string>> drain_order_;  // SetDrainOrder's
};

}  // namespace pdserve::planner

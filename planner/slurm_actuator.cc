#include "planner/slurm_actuator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "common/worker_name.h"
#include "planner/command_runner.h"

namespace pdserve::planner {

std::string SlurmActuator::JobName(Pool pool) const {
  return options_.job_name_prefix + "-" + PoolName(pool) + "-burst";
}

Result<std::vector<SlurmActuator::Job>> SlurmActuator::LiveJobs(Pool pool) {
  // Pending and running jobs (squeue's default states), id and state, one a line.
  auto ran =
      RunCommand({options_.squeue, "--noheader", "--name=" + JobName(pool), "--format=%i %T"},
                 options_.command_timeout);
  if (!ran.ok()) return ran.status();
  if (ran->exit_status != 0) return Unavailable(DescribeFailure(options_.squeue, *ran));
  std::vector<Job> jobs;
  std::set<std::string> seen;
  std::istringstream lines(ran->out);
  std::string id, state;
  while (lines >> id >> state) {
    seen.insert(id);
    if (released_.count(id)) continue;
    if (state == "COMPLETING" || state == "CANCELLED" || state == "COMPLETED") continue;
    jobs.push_back({id, state == "PENDING"});
  }
  std::erase_if(released_, [&](const std::string& gone) { return !seen.count(gone); });
  // Oldest first: job ids count up (an array job's "123_4" sorts by its number first).
  auto number = [](const std::string& id) { return std::strtoll(id.c_str(), nullptr, 10); };
  std::sort(jobs.begin(), jobs.end(), [&](const Job& a, const Job& b) {
    return std::make_pair(number(a.id), a.id) < std::make_pair(number(b.id), b.id);
  });
  return jobs;
}

Result<std::string> SlurmActuator::Submit(Pool pool) {
  std::vector<std::string> argv{options_.sbatch, "--parsable", "--job-name=" + JobName(pool)};
  argv.insert(argv.end(), options_.sbatch_args.begin(), options_.sbatch_args.end());
  std::string exports =
      "--export=ALL,PDSERVE_POOL=" + std::string(PoolName(pool)) + ",PDSERVE_CLASS=burst";
  for (const auto& [k, v] : options_.env) exports += "," + k + "=" + v;
  argv.insert(argv.end(), {exports, options_.job_script, PoolName(pool), "burst"});
  auto ran = RunCommand(argv, options_.command_timeout);
  if (!ran.ok()) return ran.status();
  if (ran->exit_status != 0) return Unavailable(DescribeFailure(options_.sbatch, *ran));
  // --parsable prints "ID" or "ID;CLUSTER".
  std::string id = ran->out.substr(0, ran->out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos) {
    return Unavailable("sbatch printed no job id: '" + ran->out + "'");
  }
  return id;
}

Status SlurmActuator::Release(const Job& job) {
  // A pending job has nothing to drain; a running one's worker drains on SIGTERM (sent to the
  // batch step too: the job script execs the worker).
  std::vector<std::string> argv{options_.scancel};
  if (!job.pending) argv.insert(argv.end(), {"--full", "--signal=TERM"});
  argv.push_back(job.id);
  auto ran = RunCommand(argv, options_.command_timeout);
  if (!ran.ok()) return ran.status();
  if (ran->exit_status != 0) return Unavailable(DescribeFailure(options_.scancel, *ran));
  released_.insert(job.id);
  return Status::Ok();
}

Status SlurmActuator::SetBurstWorkers(Pool pool, int count) {
  auto jobs = LiveJobs(pool);
  if (!jobs.ok()) return jobs.status();
  int live = static_cast<int>(jobs->size());
  for (; live < count; ++live) {
    auto id = Submit(pool);
    if (!id.ok()) return id.status();
    spdlog::info("slurm: submitted job {} ({}) for a burst {} worker", *id, JobName(pool),
                 PoolName(pool));
  }
  if (live <= count) return Status::Ok();
  // Which go: pending jobs (nothing to drain), then the running jobs of the drain order (the
  // gateway's idlest workers, named with their job), then the newest.
  std::map<std::string, size_t> drain_rank;
  for (const std::string& name : drain_order_[pool]) {
    const auto parts = ParseWorkerName(name);
    if (parts && !parts->slurm_job.empty()) drain_rank.emplace(parts->slurm_job, drain_rank.size());
  }
  auto rank = [&](const Job& j) {
    if (j.pending) return size_t{0};
    const auto r = drain_rank.find(j.id);
    return r == drain_rank.end() ? SIZE_MAX : 1 + r->second;
  };
  std::vector<Job> going(jobs->rbegin(), jobs->rend());  // the newest first
  std::stable_sort(going.begin(), going.end(),
                   [&](const Job& a, const Job& b) { return rank(a) < rank(b); });
  going.resize(static_cast<size_t>(live - count));
  for (const Job& job : going) {
    PDSERVE_RETURN_IF_ERROR(Release(job));
    spdlog::info("slurm: {} job {} ({})", job.pending ? "cancelled pending" : "draining", job.id,
                 JobName(pool));
  }
  return Status::Ok();
}

void SlurmActuator::SetDrainOrder(Pool pool, std::vector<std::string> names) {
  drain_order_[pool] = std::move(names);
}

}  // namespace pdserve::planner

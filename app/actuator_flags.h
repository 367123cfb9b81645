// The flags of `pdserve gateway --planner act`: which actuator carries out the planner's burst
// counts (planner/actuator.h) and how it reaches its orchestrator. Used by serve_commands.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/actuator.h"

namespace pdserve::app {

struct ActuatorFlags {
  std::string kind;  // slurm, kubernetes or command
  std::string command;
  std::string slurm_job_script = "deploy/slurm/pdserve-worker.sbatch";
  std::string slurm_sbatch_args;       // split on white space
  std::vector<std::string> slurm_env;  // KEY=VALUE, exported to each job
  std::string kubernetes_prefix = "pdserve";
  std::string kubernetes_api;  // HOST:PORT; "": the pod's KUBERNETES_SERVICE_HOST and _PORT
  std::string kubernetes_token_file, kubernetes_ca_file, kubernetes_namespace;  // "": the pod's
};

void AddActuatorFlags(CLI::App* gateway, ActuatorFlags* flags);

// The actuator the flags describe; InvalidArgument, naming the flag, when they do not add up.
Result<std::shared_ptr<planner::Actuator>> MakeActuator(const ActuatorFlags& flags);

}  // namespace pdserve::app

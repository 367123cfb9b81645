// The flags of `pdserve gateway --planner act`: which actuator carries out the planner's burst
// counts (planner/actuator.h) and how it reaches its orchestrator, or, for the local one, what
// command line its burst workers get. Used by gateway_command.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/actuator.h"

namespace pdserve::app {

struct ActuatorFlags {
  std::string kind;  // slurm, kubernetes, command or local
  std::string command;
  std::string slurm_job_script = "deploy/slurm/pdserve-worker.sbatch";
  std::string slurm_sbatch_args;       // split on white space
  std::vector<std::string> slurm_env;  // KEY=VALUE, exported to each job
  std::string kubernetes_prefix = "pdserve";
  std::string kubernetes_api;  // HOST:PORT; "": the pod's KUBERNETES_SERVICE_HOST and _PORT
  std::string kubernetes_token_file, kubernetes_ca_file, kubernetes_namespace;  // "": the pod's
  std::string local_prefill_args, local_decode_args;  // split on white space
};

// What --actuator local takes from the gateway it runs in: its burst workers load the gateway's
// model and dial its control address, known once the gateway listens.
struct LocalGateway {
  std::string model_dir;
  std::string cluster_token;                     // "": none
  std::function<std::string()> control_address;  // host:port; "" until the gateway listens
};

void AddActuatorFlags(CLI::App* gateway, ActuatorFlags* flags);

// The actuator the flags describe; InvalidArgument, naming the flag, when they do not add up.
// `gateway` matters to the local one only.
Result<std::shared_ptr<planner::Actuator>> MakeActuator(const ActuatorFlags& flags,
                                                        const LocalGateway& gateway = {});

}  // namespace pdserve::app

#include "app/actuator_flags.h"

#include <sstream>

#include "planner/command_actuator.h"
#include "planner/kubernetes_actuator.h"
#include "planner/local_actuator.h"
#include "planner/slurm_actuator.h"

namespace pdserve::app {

namespace {

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Burst workers as child processes of the gateway: `pdserve prefill|decode ARGS --model MODEL
// --gateway CONTROL --capacity-class burst`.
std::shared_ptr<planner::Actuator> MakeLocalActuator(const ActuatorFlags& f,
                                                     const LocalGateway& gateway) {
  planner::LocalActuatorOptions o;
  o.description =
      "pdserve prefill " + f.local_prefill_args + " | pdserve decode " + f.local_decode_args;
  o.worker_argv = [gateway, prefill = Words(f.local_prefill_args),
                   decode = Words(f.local_decode_args)](
                      planner::Pool pool) -> Result<std::vector<std::string>> {
    const std::string control = gateway.control_address ? gateway.control_address() : "";
    if (control.empty()) return Unavailable("the gateway's control port is not bound yet");
    const bool is_prefill = pool == planner::Pool::kPrefill;
    std::vector<std::string> argv = {"pdserve", is_prefill ? "prefill" : "decode"};
    const auto& args = is_prefill ? prefill : decode;
    argv.insert(argv.end(), args.begin(), args.end());
    if (!gateway.model_dir.empty()) argv.insert(argv.end(), {"--model", gateway.model_dir});
    if (!gateway.cluster_token.empty()) {
      argv.insert(argv.end(), {"--cluster-token", gateway.cluster_token});
    }
    argv.insert(argv.end(), {"--gateway", control, "--capacity-class", "burst"});
    return argv;
  };
  return std::make_shared<planner::LocalActuator>(std::move(o));
}

}  // namespace

void AddActuatorFlags(CLI::App* gw, ActuatorFlags* f) {
  gw->add_option("--actuator", f->kind,
                 "With --planner act: slurm (a job per burst worker), kubernetes (the replicas of "
                 "the pools' burst Deployments), command (runs --actuator-command POOL burst "
                 "COUNT) or local (burst workers as child processes of this gateway, also with "
                 "--planner advise: pdserve up --autoscale)")
      ->check(CLI::IsMember({"slurm", "kubernetes", "command", "local"}));
  gw->add_option("--actuator-command", f->command,
                 "command: the program run as PROGRAM POOL burst COUNT when a count changes");
  gw->add_option("--slurm-job-script", f->slurm_job_script,
                 "slurm: the batch script submitted for each burst worker (it gets POOL burst)")
      ->capture_default_str();
  gw->add_option("--slurm-sbatch-args", f->slurm_sbatch_args,
                 "slurm: more sbatch options, e.g. '--partition=gpu --gres=gpu:1'");
  gw->add_option("--slurm-env", f->slurm_env,
                 "slurm: KEY=VALUE exported to each job (repeat), e.g. PDSERVE_GATEWAY=HOST:PORT");
  gw->add_option("--kubernetes-deployments", f->kubernetes_prefix,
                 "kubernetes: scales the Deployments PREFIX-prefill-burst and PREFIX-decode-burst")
      ->capture_default_str();
  gw->add_option("--kubernetes-api", f->kubernetes_api,
                 "kubernetes: the API server as HOST:PORT (default: the pod's)");
  gw->add_option("--kubernetes-token-file", f->kubernetes_token_file,
                 "kubernetes: bearer token file (default: the pod's service account's)");
  gw->add_option("--kubernetes-ca-file", f->kubernetes_ca_file,
                 "kubernetes: CA certificates the API server's must chain to (default: the "
                 "pod's)");
  gw->add_option("--kubernetes-namespace", f->kubernetes_namespace,
                 "kubernetes: the Deployments' namespace (default: the pod's)");
  gw->add_option("--local-prefill-args", f->local_prefill_args,
                 "local: the flags of each burst prefill worker, run as pdserve prefill ARGS "
                 "--model MODEL --gateway CONTROL --capacity-class burst (e.g. '--threads 4')");
  gw->add_option(
      "--local-decode-args", f->local_decode_args,
      "local: the flags of each burst decode worker, likewise (pdserve decode ARGS ...)");
}

Result<std::shared_ptr<planner::Actuator>> MakeActuator(const ActuatorFlags& f,
                                                        const LocalGateway& gateway) {
  if (f.kind.empty()) {
    return InvalidArgument("--planner act needs --actuator slurm, kubernetes, command or local");
  }
  if (f.kind == "local") return MakeLocalActuator(f, gateway);
  if (f.kind == "command") {
    if (f.command.empty()) return InvalidArgument("--actuator command needs --actuator-command");
    return std::shared_ptr<planner::Actuator>(
        std::make_shared<planner::CommandActuator>(planner::CommandActuatorOptions{f.command}));
  }
  if (f.kind == "slurm") {
    planner::SlurmActuatorOptions o;
    o.job_script = f.slurm_job_script;
    o.sbatch_args = Words(f.slurm_sbatch_args);
    for (const std::string& kv : f.slurm_env) {
      const size_t eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos || kv.find(',') != std::string::npos) {
        return InvalidArgument("--slurm-env must be KEY=VALUE without commas, got '" + kv + "'");
      }
      o.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return std::shared_ptr<planner::Actuator>(std::make_shared<planner::SlurmActuator>(o));
  }
  planner::KubernetesActuatorOptions o;
  if (f.kubernetes_api.empty()) {
    auto pod = planner::KubernetesOptionsFromPod(f.kubernetes_prefix);
    if (!pod.ok()) {
      return InvalidArgument(pod.status().message() + " (or give --kubernetes-api HOST:PORT)");
    }
    o = *pod;
  } else {
    const size_t colon = f.kubernetes_api.rfind(':');
    const std::string port = colon == std::string::npos ? "" : f.kubernetes_api.substr(colon + 1);
    if (colon == std::string::npos || colon == 0 || port.empty() ||
        port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) {
      return InvalidArgument("--kubernetes-api must be HOST:PORT, got '" + f.kubernetes_api + "'");
    }
    o.api_host = f.kubernetes_api.substr(0, colon);
    o.api_port = std::stoi(port);
    o.deployment_prefix = f.kubernetes_prefix;
    o.namespace_name = f.kubernetes_namespace;
  }
  if (!f.kubernetes_token_file.empty()) o.token_file = f.kubernetes_token_file;
  if (!f.kubernetes_ca_file.empty()) o.ca_file = f.kubernetes_ca_file;
  if (!f.kubernetes_namespace.empty()) o.namespace_name = f.kubernetes_namespace;
  if (o.namespace_name.empty()) {
    return InvalidArgument("--kubernetes-api outside a pod needs --kubernetes-namespace");
  }
  return std::shared_ptr<planner::Actuator>(std::make_shared<planner::KubernetesActuator>(o));
}

}  // namespace pdserve::app

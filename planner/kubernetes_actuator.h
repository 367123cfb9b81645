// KubernetesActuator: burst workers as the replicas of a pool's burst Deployment
// (deploy/kubernetes/workers.yaml: PREFIX-prefill-burst, PREFIX-decode-burst). It PATCHes the
// Deployment's scale subresource (`{"spec":{"replicas":N}}`, a JSON merge patch) on the API
// server over HTTPS, the server's certificate checked against the cluster's CA and its name,
// with the pod's service-account token (read again for every call: bound tokens rotate).
// Going down with a drain order (SetDrainOrder: the gateway's idlest workers, whose hosts are
// their pods), it first reads the scale and marks the pods to go with the lowest
// controller.kubernetes.io/pod-deletion-cost, which the ReplicaSet controller deletes first; a
// pod it cannot mark leaves the choice to Kubernetes. Each pod that goes gets SIGTERM and drains
// within its grace period. deploy/kubernetes/rbac.yaml grants the gateway's service account just
// that (the scale, and patching pods).
//
// Threads: one caller at a time (planner/actuator.h).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/actuator.h"

namespace pdserve::planner {

struct KubernetesActuatorOptions {
  std::string api_host;  // from KUBERNETES_SERVICE_HOST in a pod
  int api_port = 443;    // KUBERNETES_SERVICE_PORT
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_name;  // "": read from the service account's namespace file
  std::string deployment_prefix = "pdserve";
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
};

// The options a pod's environment gives: the API server from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, the namespace from the service account's files. FailedPrecondition,
// saying what is missing, outside a pod.
Result<KubernetesActuatorOptions> KubernetesOptionsFromPod(std::string deployment_prefix);

class KubernetesActuator : public Actuator {
 public:
  explicit KubernetesActuator(KubernetesActuatorOptions options) : options_(std::move(options)) {}
  Status SetBurstWorkers(Pool pool, int count) override;
  void SetDrainOrder(Pool pool, std::vector<std::string> names) override;
  std::string Describe() const override;

 private:
  // One call to the API server: `body`, if any, as a JSON merge patch; the answer's JSON, or an
  // error with the server's message (401/403 FailedPrecondition, 404 NotFound, else
  // Unavailable).
  Result<nlohmann::json> Call(const std::string& method, const std::string& path,
                              const std::string& body) const;
  // Before scaling `pool` to `count`: the pods of the drain order that are to go, marked.
  void MarkForDeletion(Pool pool, int count);
  std::string PodPath(const std::string& pod) const;  // /api/v1/namespaces/NS/pods/POD
  std::string DeploymentName(Pool pool) const;
  // The scale subresource's path: /apis/apps/v1/namespaces/NS/deployments/NAME/scale.
  std::string ScalePath(Pool pool) const;
  KubernetesActuatorOptions options_;
  std::map<Pool, std::vector<std::string>> drain_order_;  // SetDrainOrder's
};

}  // namespace pdserve::planner

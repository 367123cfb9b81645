// KubernetesActuator: burst workers as the replicas of a pool's burst Deployment
// (deploy/kubernetes/workers.yaml: PREFIX-prefill-burst, PREFIX-decode-burst). It PATCHes the
// Deployment's scale subresource (`{"spec":{"replicas":N}}`, a JSON merge patch) on the API
// server over HTTPS, the server's certificate checked against the cluster's CA and its name,
// with the pod's service-account token (read again for every call: bound tokens rotate).
// Kubernetes picks the pods that go; each gets SIGTERM and drains within the pod's grace period.
// deploy/kubernetes/rbac.yaml grants the gateway's service account just that.
//
// Threads: one caller at a time (planner/actuator.h).
#pragma once

#include <chrono>
#include <string>

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
  std::string Describe() const override;

 private:
  std::string DeploymentName(Pool pool) const;
  // The scale subresource's path: /apis/apps/v1/namespaces/NS/deployments/NAME/scale.
  std::string ScalePath(Pool pool) const;
  KubernetesActuatorOptions options_;
};

}  // namespace pdserve::planner

#include "worker/worker_options.h"

namespace pdserve::worker {

Status SharedWorkerOptions::Validate() const {
  PDSERVE_RETURN_IF_ERROR(identity.Validate());
  if (gateway.port == 0) return InvalidArgument("the gateway's control port is required");
  return Status::Ok();
}

Result<std::unique_ptr<WorkerMetrics>> StartWorkerMetrics(const SharedWorkerOptions& options,
                                                          const std::string& role) {
  if (options.metrics_port < 0) return std::unique_ptr<WorkerMetrics>();
  return WorkerMetrics::Start("127.0.0.1", options.metrics_port, role);
}

Result<std::unique_ptr<model::StepLog>> OpenStepLog(const SharedWorkerOptions& options) {
  if (options.step_log.empty()) return std::unique_ptr<model::StepLog>();
  return model::StepLog::Open(options.step_log);
}

}  // namespace pdserve::worker

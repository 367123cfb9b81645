#include "worker/worker_options.h"

#include "model/backend_factory.h"
#include "model/cuda/cuda_backend.h"

namespace pdserve::worker {

Status SharedWorkerOptions::Validate() const {
  PDSERVE_RETURN_IF_ERROR(identity.Validate());
  if (gateway.port == 0) return InvalidArgument("the gateway's control port is required");
  return Status::Ok();
}

Result<std::unique_ptr<WorkerMetrics>> StartWorkerMetrics(const SharedWorkerOptions& options,
                                                          const std::string& role) {
  if (options.metrics_port < 0) return std::unique_ptr<WorkerMetrics>();
  return WorkerMetrics::Start(options.metrics_address, options.metrics_port, role);
}

Result<std::unique_ptr<model::Engine>> LoadWorkerEngine(
    const std::string& model_dir, model::EngineOptions options,
    const std::function<Result<uint64_t>(const model::ModelConfig&, const model::KvCacheShape&)>&
        salt_of) {
  // Engine::Load's checks, before the weights load.
  if (options.page_size < 1 || options.max_batch_tokens < 1 || options.max_running < 1) {
    return InvalidArgument("page_size, max_batch_tokens and max_running must be >= 1");
  }
  if (options.kv_lookahead_tokens < 0) {
    return InvalidArgument("kv_lookahead_tokens must be >= 0 (0: reserve max_tokens up front)");
  }
  PDSERVE_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::Load(model_dir));
  PDSERVE_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                           model::CreateBackend(model_dir, config, options));
  // The backend's config, as the worker registers it: a simulated backend's pages differ from
  // the model's, and so does its layout hash.
  PDSERVE_ASSIGN_OR_RETURN(options.cache_salt, salt_of(backend->config(), backend->kv_shape()));
  auto engine = std::make_unique<model::Engine>(std::move(backend), options);
  engine->set_eos_ids({config.eos_token_ids.begin(), config.eos_token_ids.end()});
  engine->set_vocabulary_dir(model_dir);
  return engine;
}

Result<std::unique_ptr<model::StepLog>> OpenStepLog(const SharedWorkerOptions& options) {
  if (options.step_log.empty()) return std::unique_ptr<model::StepLog>();
  return model::StepLog::Open(options.step_log);
}

Result<std::string> GpuUuidOf(std::string_view device) {
  if (device.rfind("cuda", 0) != 0) return std::string();
  PDSERVE_ASSIGN_OR_RETURN(const int index, model::ParseCudaDevice(device));
  return model::CudaDeviceUuid(index);
}

}  // namespace pdserve::worker

#include "model/backend_factory.h"

#include <optional>

#include "model/cpu_backend.h"
#include "model/cuda/cuda_backend.h"
#include "model/engine.h"
#include "model/sim/sim_backend.h"
#include "model/weights.h"

namespace pdserve::model {

int KvPages(const ModelConfig& config, const EngineOptions& options, DType kv_dtype) {
  if (options.num_pages > 0) return options.num_pages;
  // K and V of every layer, per page.
  const size_t page_bytes =
      2ull * options.page_size * config.kv_dim() * DTypeSize(kv_dtype) * config.n_layers;
  return static_cast<int>(std::max<int64_t>(1, (options.kv_memory_mb << 20) / page_bytes));
}

Result<std::unique_ptr<Backend>> CreateBackend(const std::string& model_dir,
                                               const ModelConfig& config,
                                               const EngineOptions& options) {
  if (options.device.rfind("sim:", 0) == 0) {
    PDSERVE_ASSIGN_OR_RETURN(std::string name, ParseSimDevice(options.device));
    SimBackendOptions sim;
    PDSERVE_ASSIGN_OR_RETURN(sim.profile, FindProfile(name));
    sim.page_size = options.page_size;
    sim.num_pages = options.num_pages;
    sim.slow_factor = options.sim_slow_factor;
    sim.faults = options.sim_faults;
    sim.output_ids = TextTokenIds(model_dir);
    return CreateSimBackend(config, sim);
  }
  if (options.device != "cpu") PDSERVE_RETURN_IF_ERROR(ParseCudaDevice(options.device).status());
  std::optional<DType> dtype;
  if (options.dtype != "auto") {
    dtype = ParseDType(options.dtype);
    if (!dtype) {
      return InvalidArgument("dtype '" + options.dtype + "' is not one of auto, f32, bf16, f16");
    }
    if (options.device != "cpu" && *dtype != DType::kBF16) {
      return InvalidArgument("device '" + options.device + "' holds weights in bf16; dtype '" +
                             options.dtype + "' is for the cpu");
    }
  }
  auto pages_for_memory = [&](DType kv_dtype) { return KvPages(config, options, kv_dtype); };
  std::unique_ptr<Backend> backend;
  if (options.device == "cpu") {
    PDSERVE_ASSIGN_OR_RETURN(auto weights, Weights::Load(model_dir, config));
    if (dtype) weights = Weights::ConvertedTo(std::move(weights), *dtype);
    CpuBackendOptions cpu;
    cpu.page_size = options.page_size;
    cpu.threads = options.threads;
    cpu.num_pages = options.num_pages > 0 ? options.num_pages : pages_for_memory(DType::kF32);
    PDSERVE_ASSIGN_OR_RETURN(backend, CreateCpuBackend(std::move(weights), config, cpu));
  } else {
    CudaBackendOptions cuda;
    PDSERVE_ASSIGN_OR_RETURN(cuda.device, ParseCudaDevice(options.device));
    cuda.page_size = options.page_size;
    cuda.num_pages = options.num_pages > 0 ? options.num_pages : pages_for_memory(DType::kBF16);
    if (!CudaBackendBuilt()) {
      return Unimplemented("device '" + options.device +
                           "' is not available: this pdserve was built without CUDA (use cpu)");
    }
    // The host copy of the weights is only read while uploading.
    PDSERVE_ASSIGN_OR_RETURN(auto weights, Weights::Load(model_dir, config));
    PDSERVE_ASSIGN_OR_RETURN(backend, CreateCudaBackend(std::move(weights), config, cuda));
  }
  return backend;
}

}  // namespace pdserve::model

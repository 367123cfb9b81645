// The engine's backend, chosen by its device string (EngineOptions::device): "cpu" is the CPU
// backend (cpu_backend.h), "cuda:N" the CUDA backend on GPU N (cuda/cuda_backend.h, where this
// build has it), "sim:PROFILE" the simulated backend (sim/sim_backend.h: no weights are read).
// Callers name a device and get a Backend; nothing outside model/ needs to know which
// implementation runs. Safe to call from any thread; each call loads its own weights.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/backend.h"
#include "model/model_config.h"

namespace pdserve::model {

struct EngineOptions;

// Loads the weights in `model_dir` (config already read from it) into the backend `options`
// names, with its KV pool (num_pages, or as many pages as kv_memory_mb holds) and matrix dtype.
// InvalidArgument for a device or dtype that is not one of those above (a dtype other than bf16
// on a GPU), Unimplemented for a GPU device in a build without CUDA, and the backend's own
// errors (a missing device, weights that do not fit).
Result<std::unique_ptr<Backend>> CreateBackend(const std::string& model_dir,
                                               const ModelConfig& config,
                                               const EngineOptions& options);

// The KV pool's pages for these options: num_pages, or as many pages of kv_dtype (f32 on the
// cpu, bf16 on a GPU) as kv_memory_mb holds, at least one.
int KvPages(const ModelConfig& config, const EngineOptions& options, DType kv_dtype);

// Whether this build has the CUDA backend.
bool CudaBackendBuilt();

// "cuda:N" (or "cuda", device 0) -> N; anything else is InvalidArgument.
Result<int> ParseCudaDevice(std::string_view device);

}  // namespace pdserve::model

// CpuBackend: the reference engine backend. f32 activations and f32 KV pages in host memory;
// weights keep their file dtype, copied once into huge pages (Weights::InHugePages), and are
// multiplied there by cpu_matmul. OpenMP threads inside each operation. Batch-invariant (see
// cpu_matmul.h), so the same sequence gets the same logits bit for bit whatever it is batched with.
// Driven by one thread, like every Backend.
#pragma once

#include <cstddef>
#include <memory>

#include "model/backend.h"
#include "model/weights.h"

namespace pdserve::model {

struct CpuBackendOptions {
  int num_pages = 1024;  // KV pages in the pool; must be >= 1
  int page_size = 16;    // tokens per page; must be >= 1
  int threads = 0;       // 0: all hardware threads
  // Memory the weights' huge-page copy is weighed against (CopyFitsInMemory); 0: this host's
  // MemAvailable. Past a quarter of it the backend serves from the file maps.
  size_t available_memory_bytes = 0;
};

Result<std::unique_ptr<Backend>> CreateCpuBackend(std::shared_ptr<const Weights> weights,
                                                  const ModelConfig& config,
                                                  const CpuBackendOptions& options);

}  // namespace pdserve::model

// Internal to kv_transfer: the CUDA-IPC (cuda_ipc_payload.cc) and NCCL (nccl_payload.cc)
// payload paths behind device_payload.h's factories, and the CUDA/NCCL check macros. Without
// PDSERVE_HAVE_CUDA (PDSERVE_HAVE_NCCL) the factories answer Unimplemented.
// Same thread-safety as device_payload.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kv_transfer/device_payload.h"

#if PDSERVE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <fmt/format.h>

// Evaluates a CUDA runtime call; on failure returns a Status naming the call, file and line.
#define PDSERVE_CUDA_CHECK(call)                                                                \
  do {                                                                                          \
    const cudaError_t pdserve_cuda_err_ = (call);                                               \
    if (pdserve_cuda_err_ != cudaSuccess) {                                                     \
      return ::pdserve::Status(::pdserve::StatusCode::kUnavailable,                             \
                               fmt::format("{} failed at {}:{}: {}", #call, __FILE__, __LINE__, \
                                           cudaGetErrorString(pdserve_cuda_err_)));             \
    }                                                                                           \
  } while (0)
#endif

#if PDSERVE_HAVE_NCCL
#include <nccl.h>

// Evaluates an NCCL call; ncclInProgress (non-blocking communicator) counts as issued.
#define PDSERVE_NCCL_CHECK(call)                                                                \
  do {                                                                                          \
    const ncclResult_t pdserve_nccl_res_ = (call);                                              \
    if (pdserve_nccl_res_ != ncclSuccess && pdserve_nccl_res_ != ncclInProgress) {              \
      return ::pdserve::Status(::pdserve::StatusCode::kUnavailable,                             \
                               fmt::format("{} failed at {}:{}: {}", #call, __FILE__, __LINE__, \
                                           ncclGetErrorString(pdserve_nccl_res_)));             \
    }                                                                                           \
  } while (0)
#endif

namespace pdserve::kv_transfer {

Result<std::unique_ptr<DevicePayloadSender>> MakeCudaIpcSender(const KvLayout& layout, int device);
Result<std::unique_ptr<DevicePayloadReceiver>> MakeCudaIpcReceiver(const KvLayout& layout,
                                                                   int device,
                                                                   std::vector<void*> layer_bases,
                                                                   int num_pages);
Result<std::unique_ptr<DevicePayloadSender>> MakeNcclSender(const KvLayout& layout, int device);
Result<std::unique_ptr<DevicePayloadReceiver>> MakeNcclReceiver(const KvLayout& layout, int device);

}  // namespace pdserve::kv_transfer

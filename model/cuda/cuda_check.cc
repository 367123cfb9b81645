#include "model/cuda/cuda_check.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "model/cuda/cublas_library.h"
#include "model/cuda/device_memory.h"

namespace pdserve::model::cuda {
namespace {

// "model/cuda/x.cc:12" rather than the build machine's absolute path.
std::string Where(const char* file, int line) {
  std::string path(file);
  const size_t at = path.rfind("/model/");
  if (at != std::string::npos) path.erase(0, at + 1);
  return path + ":" + std::to_string(line);
}

}  // namespace

Status CudaStatus(cudaError_t error, const char* call, const char* file, int line) {
  std::string message = Where(file, line) + ": " + call + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")";
  switch (error) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(std::move(message));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return FailedPrecondition(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

Status CublasStatus(cublasStatus_t error, const char* call, const char* file, int line) {
  auto cublas = Cublas();  // loaded: a cuBLAS call returned this error
  std::string message = Where(file, line) + ": " + call + ": " +
                        (cublas.ok() ? std::string((*cublas)->GetStatusName(error)) + " (" +
                                           (*cublas)->GetStatusString(error) + ")"
                                     : "cuBLAS status " + std::to_string(error));
  if (error == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

template <bool kPinned>
Status CudaAllocation<kPinned>::Reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::Ok();
  const size_t grown = bytes_ == 0 ? bytes : std::max(bytes, bytes_ + bytes_ / 2);
  Release();
  void* ptr = nullptr;
  if constexpr (kPinned) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&ptr, grown));
  } else {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, grown));
  }
  ptr_ = ptr;
  bytes_ = grown;
  return Status::Ok();
}

template <bool kPinned>
Status CudaAllocation<kPinned>::ReserveZeroed(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_) return Status::Ok();
  PDSERVE_RETURN_IF_ERROR(Reserve(bytes));
  if constexpr (kPinned) {
    std::memset(ptr_, 0, bytes_);
  } else {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ptr_, 0, bytes_, stream));
  }
  return Status::Ok();
}

template <bool kPinned>
void CudaAllocation<kPinned>::Release() {
  if (ptr_ == nullptr) return;
  if constexpr (kPinned) {
    cudaFreeHost(ptr_);  // nothing to do about a failure while freeing
  } else {
    cudaFree(ptr_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

template class CudaAllocation<false>;
template class CudaAllocation<true>;

}  // namespace pdserve::model::cuda

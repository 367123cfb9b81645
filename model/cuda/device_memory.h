// Owned CUDA allocations for the CUDA backend: DeviceBuffer (cudaMalloc) and PinnedBuffer
// (cudaMallocHost), move-only, freed on destruction, grown on demand by Reserve (which drops the
// old contents). Host code of CUDA builds only. Not thread-safe: each belongs to one backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "common/status.h"

namespace pdserve::model::cuda {

template <bool kPinned>
class CudaAllocation {
 public:
  CudaAllocation() = default;
  CudaAllocation(CudaAllocation&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  CudaAllocation& operator=(CudaAllocation&& other) noexcept {
    if (this != &other) {
      Release();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;
  ~CudaAllocation() { Release(); }

  // At least `bytes` (exactly that the first time; then by half again, so steps that grow a
  // little at a time do not reallocate every time). Contents are lost when it grows.
  Status Reserve(size_t bytes);
  // Reserve, and memory it had to allocate is zeroed (on `stream`, for device memory): where
  // contents must start at zero. (cudaMalloc may hand back the address just freed, so a caller
  // cannot tell new memory by its address.)
  Status ReserveZeroed(size_t bytes, cudaStream_t stream);

  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Release();

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaAllocation<false>;
using PinnedBuffer = CudaAllocation<true>;

}  // namespace pdserve::model::cuda

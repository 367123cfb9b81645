// Turns CUDA runtime and cuBLAS failures into pdserve Status errors that name the call, the file
// and the line: `PDSERVE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n));` returns the error from the
// enclosing function. Out-of-memory becomes ResourceExhausted; the rest Internal (a sticky
// device error leaves the backend unusable, and every later call reports it). Host code only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/status.h"

namespace pdserve::model::cuda {

Status CudaStatus(cudaError_t error, const char* call, const char* file, int line);
Status CublasStatus(cublasStatus_t error, const char* call, const char* file, int line);

}  // namespace pdserve::model::cuda

#define PDSERVE_CUDA_RETURN_IF_ERROR(call)                                                       \
  do {                                                                                           \
    const cudaError_t pdserve_cuda_error_ = (call);                                              \
    if (pdserve_cuda_error_ != cudaSuccess) {                                                    \
      return ::pdserve::model::cuda::CudaStatus(pdserve_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                            \
  } while (0)

#define PDSERVE_CUBLAS_RETURN_IF_ERROR(call)                                              \
  do {                                                                                    \
    const cublasStatus_t pdserve_cublas_error_ = (call);                                  \
    if (pdserve_cublas_error_ != CUBLAS_STATUS_SUCCESS) {                                 \
      return ::pdserve::model::cuda::CublasStatus(pdserve_cublas_error_, #call, __FILE__, \
                                                  __LINE__);                              \
    }                                                                                     \
  } while (0)

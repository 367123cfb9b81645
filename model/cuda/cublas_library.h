// cuBLAS, opened with dlopen when the first CUDA backend (or peak measurement) needs it. Linking
// it instead maps libcublas and its 540 MB libcublasLt into every pdserve process at start, GPU
// or not, costing start time and resident memory (docs/benchmarks.md, Others). The entry points
// the backend uses, under their cuBLAS names. Loaded once; safe from any thread.
#pragma once

#include <cublas_v2.h>

#include "common/status.h"

namespace pdserve::model::cuda {

struct CublasLibrary {
  cublasStatus_t (*Create)(cublasHandle_t* handle) = nullptr;
  cublasStatus_t (*Destroy)(cublasHandle_t handle) = nullptr;
  cublasStatus_t (*SetStream)(cublasHandle_t handle, cudaStream_t stream) = nullptr;
  cublasStatus_t (*SetWorkspace)(cublasHandle_t handle, void* workspace, size_t bytes) = nullptr;
  cublasStatus_t (*GemmEx)(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const void* alpha,
                           const void* a, cudaDataType a_type, int lda, const void* b,
                           cudaDataType b_type, int ldb, const void* beta, void* c,
                           cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                           cublasGemmAlgo_t algo) = nullptr;
  const char* (*GetStatusName)(cublasStatus_t status) = nullptr;
  const char* (*GetStatusString)(cublasStatus_t status) = nullptr;
};

// libcublas.so.<major> of the toolkit built against (found through the binary's run path,
// LD_LIBRARY_PATH or the system's cache); Unavailable, saying which, when it cannot be opened.
Result<const CublasLibrary*> Cublas();

}  // namespace pdserve::model::cuda

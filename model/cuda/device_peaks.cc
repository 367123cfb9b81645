// MeasureCudaPeaks (cuda_backend.h): the copy bandwidth and bf16 matrix rate that
// `pdserve bench engine --device cuda:N` holds its decode and prefill figures against.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>

#include "model/cuda/cublas_library.h"
#include "model/cuda/cuda_backend.h"
#include "model/cuda/cuda_check.h"
#include "model/cuda/device_memory.h"
#include "model/cuda/kernels.h"

namespace pdserve::model {
namespace {

using cuda::DeviceBuffer;

// The stream, events and cuBLAS handle of one measurement, released however it ends.
struct Timer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  const cuda::CublasLibrary* blas = nullptr;
  cublasHandle_t cublas = nullptr;
  ~Timer() {
    if (stream) cudaStreamSynchronize(stream);
    if (cublas) blas->Destroy(cublas);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
};

// The fastest of `reps` runs of `work` (after one warm-up), in seconds. Each run is a
// millisecond or two, so 20 of them cost little, and the fastest has the clocks fully up.
template <typename Work>
Result<double> BestSeconds(Timer& timer, int reps, Work work) {
  double best = 1e30;
  for (int rep = 0; rep <= reps; ++rep) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(timer.start, timer.stream));
    PDSERVE_RETURN_IF_ERROR(work());
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(timer.stop, timer.stream));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(timer.stop));
    float ms = 0;
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, timer.start, timer.stop));
    if (rep > 0) best = std::min(best, ms / 1e3);
  }
  return best;
}

}  // namespace

Result<CudaPeaks> MeasureCudaPeaks(int device) {
  CudaPeaks peaks;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp props;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  peaks.device_name = props.name;
  Timer timer;
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&timer.stream, cudaStreamNonBlocking));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer.start));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer.stop));
  PDSERVE_ASSIGN_OR_RETURN(timer.blas, cuda::Cublas());
  PDSERVE_CUBLAS_RETURN_IF_ERROR(timer.blas->Create(&timer.cublas));
  PDSERVE_CUBLAS_RETURN_IF_ERROR(timer.blas->SetStream(timer.cublas, timer.stream));

  {  // Copy: 1 GiB (well past any L2), or a quarter of what is free.
    size_t free_bytes = 0, total_bytes = 0;
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t bytes = std::min<size_t>(1u << 30, free_bytes / 4) / 256 * 256;
    DeviceBuffer src, dst;
    PDSERVE_RETURN_IF_ERROR(src.Reserve(bytes));
    PDSERVE_RETURN_IF_ERROR(dst.Reserve(bytes));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(src.get<void>(), 1, bytes, timer.stream));
    PDSERVE_ASSIGN_OR_RETURN(
        double seconds, BestSeconds(timer, 20, [&]() -> Status {
          PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.get<void>(), src.get<void>(), bytes,
                                                       cudaMemcpyDeviceToDevice, timer.stream));
          return Status::Ok();
        }));
    peaks.copy_gbps = 2.0 * static_cast<double>(bytes) / seconds / 1e9;
  }
  {  // Matrix rate: bf16 GEMM, f32 compute, the "TN" layout the backend uses, random operands.
    constexpr int n = 8192;
    const size_t elems = static_cast<size_t>(n) * n;
    DeviceBuffer a, b, c;
    PDSERVE_RETURN_IF_ERROR(a.Reserve(elems * 2));
    PDSERVE_RETURN_IF_ERROR(b.Reserve(elems * 2));
    PDSERVE_RETURN_IF_ERROR(c.Reserve(elems * 2));
    PDSERVE_CUDA_RETURN_IF_ERROR(
        cuda::LaunchFillNormal(a.get<cuda::bf16>(), elems, 1, 0, 1, timer.stream));
    PDSERVE_CUDA_RETURN_IF_ERROR(
        cuda::LaunchFillNormal(b.get<cuda::bf16>(), elems, 2, 0, 1, timer.stream));
    const float alpha = 1.0f, beta = 0.0f;
    PDSERVE_ASSIGN_OR_RETURN(
        double seconds, BestSeconds(timer, 20, [&]() -> Status {
          PDSERVE_CUBLAS_RETURN_IF_ERROR(timer.blas->GemmEx(
              timer.cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.get<void>(), CUDA_R_16BF,
              n, b.get<void>(), CUDA_R_16BF, n, &beta, c.get<void>(), CUDA_R_16BF, n,
              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          return Status::Ok();
        }));
    peaks.bf16_tflops = 2.0 * n * static_cast<double>(n) * n / seconds / 1e12;
  }
  return peaks;
}

}  // namespace pdserve::model
